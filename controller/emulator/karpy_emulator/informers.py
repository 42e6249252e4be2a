"""Informer caches for the emulation's controller stand-ins: the objects of a resource as last read, brought up to
date at each pass from the writes made since, and what changed (client-go tools/cache: a reflector lists once, then
applies watch events to its store, and the controller's event handlers queue the keys that changed).

A stand-in keeps a `Cache` per resource it reads and calls `refresh` at the start of a pass. The answer is the
`Delta`s since its last refresh, which the stand-in turns into the keys it must look at again (a ReplicaSet whose
pods changed, the owner of a dependent that went, the pods of a node that turned Ready), as kube-controller-manager's
controllers queue keys from their informers' events: a pass costs what changed, not the size of the cluster.

Given a `reads.StoreReader` (the shared in-process view of the store) the deltas are the store's own writes since
the cache's revision (`StoreReader.changes`, from `FakeKubeAPI.changes_since`), read for every cache of the refresh
in one call on the server's loop, so they are one consistent cut of the store; a cache starting out, or one
whose history was compacted meanwhile (a watch would get 410 Expired), lists instead. Given any other `reads.Reader`
(a plain client, in tests), a refresh lists and compares resourceVersions. The cached objects are the store's own
(or the list's): never change them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from karpy.kube import resources
from karpy_emulator import reads
from karpy_emulator.apiserver import watching

Key = tuple[str, str]
"""(namespace, name) of an object ("" for the namespace of a cluster-scoped one)."""


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata; empty when it has none (or not a mapping)."""
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def key_of(obj: Mapping[str, Any]) -> Key:
    md = meta(obj)
    return str(md.get("namespace") or ""), str(md.get("name") or "")


def key_text(obj: Mapping[str, Any]) -> str:
    """`key_of` as "namespace/name", as logs and reports name a namespaced object."""
    return "/".join(key_of(obj))


@dataclass(frozen=True, slots=True)
class Delta:
    """One object's change between two refreshes: as the cache had it (None: new) and as it is now (None: gone)."""

    key: Key
    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None


class Cache:
    """The objects of one resource as of the last `refresh` (see the module docstring)."""

    def __init__(self, res: resources.Resource) -> None:
        self.res = res
        self.objects: dict[Key, Mapping[str, Any]] = {}
        self.revision: int | None = None
        """The store's revision the cache is current to; None: it lists on its next refresh."""

    def sorted(self) -> Iterator[Mapping[str, Any]]:
        """The cached objects in a LIST's order (by namespace, then name)."""
        for key in sorted(self.objects):
            yield self.objects[key]

    def replace(self, listed: Sequence[Mapping[str, Any]], revision: int | None) -> list[Delta]:
        """Take a full list as the cache's contents; the deltas are the objects whose resourceVersion differs."""
        fresh = {key_of(obj): obj for obj in listed}
        deltas = [
            Delta(key, old, fresh.get(key))
            for key, old in self.objects.items()
            if key not in fresh or _version(fresh[key]) != _version(old)
        ]
        deltas += [Delta(key, None, obj) for key, obj in fresh.items() if key not in self.objects]
        self.objects, self.revision = fresh, revision
        return deltas

    def apply(self, changes: Sequence[watching.Change], revision: int) -> list[Delta]:
        """Apply the store's changes in order; one delta per object that changed (an object created and deleted
        in between leaves none)."""
        before: dict[Key, Mapping[str, Any] | None] = {}
        for change in changes:
            key = key_of(change.obj)
            if key not in before:
                before[key] = self.objects.get(key)
            if change.type is watching.EventType.DELETED:
                self.objects.pop(key, None)
            else:
                self.objects[key] = change.obj
        self.revision = revision
        deltas = [Delta(key, old, self.objects.get(key)) for key, old in before.items()]
        return [d for d in deltas if d.old is not None or d.new is not None]


class Index:
    """The keys of the cached objects by values of theirs (`values(obj)`: a pod's node, a dependent's owner uids),
    kept from the deltas, as client-go's cache.Indexer keeps its indices."""

    def __init__(self, values: Callable[[Mapping[str, Any]], Iterable[str]]) -> None:
        self._values = values
        self._keys: dict[str, set[Key]] = {}

    def get(self, value: str) -> Set[Key]:
        return self._keys.get(value, frozenset())

    def update(self, delta: Delta) -> set[str]:
        """Index the object's new version in place of its old one; the values it left or joined."""
        before = set(self._values(delta.old)) if delta.old is not None else set()
        after = set(self._values(delta.new)) if delta.new is not None else set()
        for value in before - after:
            members = self._keys[value]
            members.discard(delta.key)
            if not members:
                del self._keys[value]
        for value in after - before:
            self._keys.setdefault(value, set()).add(delta.key)
        return before ^ after


def _version(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("resourceVersion") or "")


async def refresh(reader: reads.Reader, caches: Sequence[Cache]) -> list[list[Delta]]:
    """Bring every cache up to date; per cache, the deltas since its last refresh (see the module docstring)."""
    if isinstance(reader, reads.StoreReader):
        answers, revision = await reader.changes([(cache.res, cache.revision) for cache in caches])
        return [
            cache.replace(listed, revision) if listed is not None else cache.apply(changes, revision)
            for cache, (listed, changes) in zip(caches, answers, strict=True)
        ]
    found = []
    for cache in caches:
        listed, _ = await reader.list(cache.res)
        found.append(cache.replace(listed, None))
    return found
