"""How the emulated control plane reads the cluster: one shared in-process view of the API server's store.

kube-scheduler and kube-controller-manager's controllers do not LIST on every pass: they read shared informer
caches, fed by one watch per resource, whose objects every reader shares and none may change
(client-go tools/cache/shared_informer.go, listers). The stand-ins run in the emulated API server's own process, so
their shared cache is the store itself: `StoreReader.list` answers what a LIST with the same selectors would, in the
same order, from the stored objects, with no JSON encoded or parsed and no HTTP round trip (10,000 pods listed by
five stand-ins twice a second cost the emulation most of its CPU). Unlike an informer it is never stale: a pass
sees every write the API server answered before it, so a test that writes and then runs one pass needs no wait.

`StoreReader.changed_at` is the shared view's change feed (`loop.Watch`): a stand-in reads one revision per tick and
lists only when something it reads was written since its last pass.

`Informer` goes one step further, for a stand-in whose pass would otherwise list a whole resource: it keeps the
resource's objects and, on each `sync`, takes only the changes since the revision it last saw
(`StoreReader.changes`, from the store's change history; a list again when that history no longer reaches back),
and says which objects changed, so the stand-in updates what it derived from those alone, as a controller fed by
an informer's event handlers does (client-go tools/cache/shared_informer.go, the indexer it feeds). Over a plain
client it lists on each `sync` and compares resourceVersions: same answers, the cost of a LIST.

Writes still go through the API server over HTTP (admission, validation, watch events for the controller). What a
reader gets is the stored object itself: never change it (copy first), as with an informer's objects.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import kmock

from karpy import clock as karpy_clock
from karpy.kube import resources
from karpy_emulator.apiserver import runner, selectors, watching


class Reader(Protocol):
    """The read of a LIST (`karpy.kube.client.KubeClient.list` is one, `StoreReader` the shared one)."""

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]: ...


ObjectKey = tuple[str, str]
"""(namespace, "" when cluster-scoped; name): an `Informer`'s key, sorting in a LIST's order."""


@runtime_checkable
class ChangeLog(Protocol):
    """The changes to a resource after a revision (`StoreReader` is one)."""

    async def changes(self, res: resources.Resource, *, since: int) -> tuple[Sequence[watching.Change] | None, int]: ...


class StoreReader:
    """Lists from the store of the API server `served` runs, on that server's loop (see the module docstring).

    `activity`: where the read reports itself as work in flight (an autojump clock must not move time while the
    stand-ins are still reading)."""

    def __init__(self, served: runner.KubeAPIRunner, *, activity: karpy_clock.Activity = karpy_clock.UNTRACKED) -> None:
        self._served = served
        self._activity = activity

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """The stored objects of `res` matching the selectors (all namespaces when `namespace` is empty), sorted by
        namespace and name as the API server's LIST, and the store's resourceVersion then."""
        watch = watching.Filter(
            namespace=namespace if res.namespaced and namespace else None,
            labels=selectors.parse_labels(label_selector),
            fields=selectors.parse_fields(field_selector),
        )
        stored = kmock.resource(f"{res.api_version}/{res.plural}")
        with self._activity.busy():
            return await self._served.read(functools.partial(self._served.api.snapshot, stored, watch))

    async def changes(self, res: resources.Resource, *, since: int) -> tuple[Sequence[watching.Change] | None, int]:
        """The changes to `res` after revision `since`, oldest first, and the revision they reach; None in place of
        the changes when the store no longer keeps them all (list again). See `server.FakeKubeAPI.changes_since`."""
        stored = kmock.resource(f"{res.api_version}/{res.plural}")
        with self._activity.busy():
            return await self._served.read(functools.partial(self._served.api.changes_since, stored, since))

    async def changed_at(self, watched: Sequence[resources.Resource]) -> int:
        """The revision of the latest write to any object of `watched` (see `server.FakeKubeAPI.changed_at`)."""
        stored = [kmock.resource(f"{res.api_version}/{res.plural}") for res in watched]
        with self._activity.busy():
            return await self._served.read(functools.partial(self._served.api.changed_at, stored))


class Informer:
    """The objects of one resource, kept current change by change (see the module docstring). Its objects are the
    reader's own (the stored dicts, for a `StoreReader`): never change them."""

    def __init__(self, reader: Reader, res: resources.Resource) -> None:
        self._reader = reader
        self._res = res
        self._objects: dict[ObjectKey, Mapping[str, Any]] = {}
        self._revision: int | None = None  # None: never listed

    @property
    def objects(self) -> Mapping[ObjectKey, Mapping[str, Any]]:
        """Every object as of the last `sync`, by `ObjectKey`."""
        return self._objects

    async def sync(self) -> set[ObjectKey]:
        """Catch up with the store; returns the keys of the objects created, changed or deleted since the last
        `sync` (every key, on the first)."""
        if isinstance(self._reader, ChangeLog) and self._revision is not None:
            changes, revision = await self._reader.changes(self._res, since=self._revision)
            if changes is not None:
                self._revision = revision
                return self._apply(changes)
        listed, version = await self._reader.list(self._res)
        self._revision = int(version) if version.isdigit() else None
        return self._replace(listed)

    def _apply(self, changes: Sequence[watching.Change]) -> set[ObjectKey]:
        changed: set[ObjectKey] = set()
        for change in changes:
            key = object_key(change.obj)
            if change.type is watching.EventType.DELETED:
                self._objects.pop(key, None)
            else:
                self._objects[key] = change.obj
            changed.add(key)
        return changed

    def _replace(self, listed: Sequence[Mapping[str, Any]]) -> set[ObjectKey]:
        """Every object as listed; the changed keys are those whose resourceVersion moved, came or went."""
        before, self._objects = self._objects, {object_key(obj): obj for obj in listed}
        changed = {key for key in before if key not in self._objects}
        for key, obj in self._objects.items():
            old = before.get(key)
            if old is None or _version(old) != _version(obj):
                changed.add(key)
        return changed


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
