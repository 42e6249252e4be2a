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

Stand-ins that keep objects between passes read only the changes since (`StoreReader.changes`, through
`karpy_emulator.informers`).

Writes still go through the API server over HTTP (admission, validation, watch events for the controller). What a
reader gets is the stored object itself: never change it (copy first), as with an informer's objects.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import kmock

from karpy import clock as karpy_clock
from karpy.kube import resources
from karpy_emulator.apiserver import runner, selectors, watching

Listed = list[Mapping[str, Any]]
Answer = tuple[Listed | None, list[watching.Change]]
"""What the store answers for one cache: a full list (then no changes), or the changes since its revision."""


class Reader(Protocol):
    """The read of a LIST (`karpy.kube.client.KubeClient.list` is one, `StoreReader` the shared one)."""

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]: ...


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

    async def changed_at(self, watched: Sequence[resources.Resource]) -> int:
        """The revision of the latest write to any object of `watched` (see `server.FakeKubeAPI.changed_at`)."""
        stored = [kmock.resource(f"{res.api_version}/{res.plural}") for res in watched]
        with self._activity.busy():
            return await self._served.read(functools.partial(self._served.api.changed_at, stored))

    async def changes(self, asked: Sequence[tuple[resources.Resource, int | None]]) -> tuple[Sequence[Answer], int]:
        """For each (resource, revision): its changes since the revision, or a full list when the revision is None
        or its history was compacted; and the store's revision they bring the caches to. One read on the server's
        loop for all of them, so the answers are one consistent cut of the store."""
        stored = [(kmock.resource(f"{res.api_version}/{res.plural}"), revision) for res, revision in asked]
        with self._activity.busy():
            return await self._served.read(functools.partial(_answer, self._served, stored))


def _answer(served: runner.KubeAPIRunner, asked: list[tuple[kmock.resource, int | None]]) -> tuple[list[Answer], int]:
    """`StoreReader.changes`, on the server's loop (no write can come between the answers)."""
    api = served.api
    answers: list[Answer] = []
    for resource, revision in asked:
        changes = api.changes_since(resource, revision) if revision is not None else None
        if changes is None:
            listed, _ = api.snapshot(resource, watching.Filter())
            answers.append((list(listed), []))
        else:
            answers.append((None, changes))
    return answers, api.resource_version
