"""Persistence of the emulated API server: kmock's object store plus what etcd and the watch cache add.

A global resourceVersion counter, per-resource change history for watches resuming from a version (410 Expired
once compacted), deletion through finalizers, and the watch streams themselves. Callers hold `lock` around reads
that lead to writes; `watch` takes it itself to snapshot and subscribe atomically.

Every stored version is encoded as JSON once, when it is written (`encoded`): lists, reads and every watcher's
event reuse those bytes instead of serialising the same object again per reader. Stored versions are never changed
in place (every write stores a new dict), which is what makes that cache valid.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import kmock

from karpy_emulator.apiserver import kmock_private, objects, watching

Key = tuple[kmock.resource, str | None, str]


class Store:
    def __init__(
        self,
        objects_: kmock.ObjectsArray,
        buses: dict[kmock.resource, kmock_private.Bus[Any]],
        lock: asyncio.Lock,
        *,
        clock: Callable[[], float],
        watch_history: int,
        object_history: int | None,
    ) -> None:
        self.objects = objects_
        self.lock = lock
        self._buses = buses
        self._clock = clock
        self._watch_history = watch_history
        self._object_history = object_history
        self.resource_version = 1  # etcd starts an empty cluster at revision 1
        self._changes: dict[kmock.resource, collections.deque[watching.Change]] = {}
        self._compacted: dict[kmock.resource, int] = {}
        self._encoded: dict[Key, tuple[object, Any, bytes]] = {}  # key -> (kmock version, its dict, JSON)
        # The live keys of each resource, in creation order: a LIST or a watch's initial state walks only its own
        # resource's objects instead of every object ever stored (kmock keeps deleted ones too).
        self._live_keys: dict[tuple[str | None, ...], dict[Key, None]] = {}
        # The revision of each resource's last change, by group and plural (whatever version it was written in):
        # what lets the emulated control plane's stand-ins skip a pass when nothing they read has changed.
        self._changed_at: dict[tuple[str | None, str | None], int] = {}
        self._closing = False

    # -- reads --------------------------------------------------------------------------------------------------

    def live(self, key: Key) -> dict[str, Any] | None:
        """The stored object (a shallow copy: copy deeply before changing it), or None."""
        if key not in self.objects:
            return None
        stored = self.objects[key]
        return None if stored.deleted else stored.last.raw

    def changed_at(self, resource: kmock.resource) -> int:
        """The revision of the last write to any object of `resource` (0: none since the store started)."""
        return self._changed_at.get((resource.group, resource.plural), 0)

    def changes_since(self, resource: kmock.resource, revision: int) -> list[watching.Change] | None:
        """The writes to `resource` after `revision`, oldest first, as the watch cache holds them (every version the
        resource was written in); None when some were compacted away (the reader must list again, as a watch
        resuming from there gets 410 Expired)."""
        found: list[watching.Change] = []
        for written, changes in self._changes.items():
            if (written.group, written.plural) != (resource.group, resource.plural):
                continue
            if revision < self._compacted.get(written, 0):
                return None
            for change in reversed(changes):  # newest first: stop at what the reader has
                if change.resource_version <= revision:
                    break
                found.append(change)
        found.sort(key=lambda change: change.resource_version)
        return found

    def live_objects(self, resource: kmock.resource, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        for _, obj in self.live_items(resource, namespace):
            yield obj

    def live_items(
        self, resource: kmock.resource, namespace: str | None = None
    ) -> Iterator[tuple[Key, dict[str, Any]]]:
        """(key, stored object) of the live objects of `resource` (in `namespace` when given)."""
        for key in self._live_keys.get(_resource_id(resource), {}):
            if namespace is not None and key[1] != namespace:
                continue
            try:
                stored = self.objects[key]
            except KeyError:  # taken out of kmock's store directly (tests do, to play a vanished object)
                continue
            if not stored.deleted:
                yield key, stored.last.raw

    def encoded(self, key: Key) -> bytes | None:
        """The live object at `key` as JSON (encoded once per stored version), or None when absent."""
        if key not in self.objects or self.objects[key].deleted:
            return None
        return self.encoded_live(key)

    def encoded_live(self, key: Key) -> bytes:
        """`encoded` of a key known to be live (e.g. from `live_items`)."""
        version = self.objects[key].last
        cached = self._encoded.get(key)
        if cached is not None and cached[0] is version:
            return cached[2]
        raw = version.raw
        data = watching.encode(raw)
        self._encoded[key] = (version, raw, data)
        return data

    def encoded_as(self, key: Key, obj: Mapping[str, Any]) -> bytes:
        """`obj` as JSON: the cached bytes when it is the object last stored at `key`, else encoded now."""
        cached = self._encoded.get(key)
        if cached is not None and cached[1] is obj and not self.objects[key].deleted:
            return cached[2]
        return watching.encode(obj)

    # -- writes (under the lock) --------------------------------------------------------------------------------

    def next_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    async def add(self, key: Key, obj: dict[str, Any]) -> None:
        """Store a created object whose resourceVersion is `next_version()`."""
        self.next_version()
        encoded = self._put(key, obj)
        await self._publish(
            key[0], watching.Change(watching.EventType.ADDED, self.resource_version, obj, None, encoded)
        )

    async def update(
        self, key: Key, old: dict[str, Any], result: dict[str, Any], *, held: bool = False
    ) -> dict[str, Any]:
        """Store `result` (stamped with the next version); deletes it when its last finalizer went away, unless
        `held` (a terminating namespace, which its controller removes)."""
        self.next_version()
        encoded = self._put(key, result)
        meta = objects.metadata(result)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not held:
            self._gone(key)
            change = watching.Change(watching.EventType.DELETED, self.resource_version, result, None, encoded)
        else:
            change = watching.Change(watching.EventType.MODIFIED, self.resource_version, result, old, encoded)
        await self._publish(key[0], change)
        return result

    async def delete(self, key: Key, old: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Delete now, or mark deleting when finalizers hold the object; returns (object, whether it is gone)."""
        meta = objects.metadata(old)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old, False
            marked = objects.clone(old)
            marked["metadata"].update(deletionTimestamp=objects.timestamp(self._clock()), deletionGracePeriodSeconds=0)
            marked["metadata"]["resourceVersion"] = str(self.resource_version + 1)
            return await self.update(key, old, marked), False
        final = objects.clone(old)
        final["metadata"]["resourceVersion"] = str(self.next_version())
        encoded = self._put(key, final)
        self._gone(key)
        change = watching.Change(watching.EventType.DELETED, self.resource_version, final, None, encoded)
        await self._publish(key[0], change)
        return final, True

    def _put(self, key: Key, obj: dict[str, Any]) -> bytes:
        """Store `obj` as the latest version at `key`; returns its JSON (kept for the readers of that version)."""
        if key not in self.objects:
            self.objects[key] = obj
        else:
            history = self.objects[key].history
            history.append(obj)
            if self._object_history is not None and len(history) > self._object_history:
                del history[: len(history) - self._object_history]
        encoded = watching.encode(obj)
        self._encoded[key] = (self.objects[key].last, obj, encoded)
        self._live_keys.setdefault(_resource_id(key[0]), {})[key] = None
        return encoded

    def _gone(self, key: Key) -> None:
        self.objects[key].delete()
        self._encoded.pop(key, None)
        self._live_keys.get(_resource_id(key[0]), {}).pop(key, None)

    async def _publish(self, resource: kmock.resource, change: watching.Change) -> None:
        changes = self._changes.setdefault(resource, collections.deque(maxlen=self._watch_history))
        if len(changes) == changes.maxlen:
            self._compacted[resource] = changes[0].resource_version
        changes.append(change)
        self._changed_at[(resource.group, resource.plural)] = change.resource_version
        await self._buses[resource].put(change)

    # -- watches ------------------------------------------------------------------------------------------------

    async def close_watches(self) -> None:
        """End every open watch stream, so that the server can stop without waiting for clients."""
        self._closing = True
        await self.end_watches()

    async def end_watches(self) -> None:
        """End every open watch stream, as an API server does at a watch's timeout or on restart; new ones start."""
        for bus in list(self._buses.values()):
            await bus.put(None)

    async def watch(
        self,
        resource: kmock.resource,
        kind: objects.Kind,
        watch: watching.Filter,
        *,
        since: str | None,
        initial_events: bool,
        lifetime: float | None,
    ) -> AsyncIterator[bytes]:
        yield b""  # sends the headers now: a watch on a quiet resource must still start
        if self._closing:
            return
        bus = self._buses[resource]
        async with self.lock:  # no write between the snapshot and the mark
            mark = await bus.mark()
            backlog = self._backlog(resource, kind, watch, since=since, initial_events=initial_events)
        try:
            if isinstance(backlog, dict):  # an ERROR event ends the stream
                yield watching.encode(backlog) + b"\n"
                return
            for line in backlog:
                yield line
            async with asyncio.timeout(lifetime):  # ?timeoutSeconds=
                async for change in bus.stream(since=mark):
                    if change is None:
                        return
                    type_ = watching.visible(change, watch)
                    if type_ is not None:
                        yield watching.frame(type_, change.encoded)
        except TimeoutError:
            return
        finally:
            await bus.unmark(mark)

    def _backlog(
        self,
        resource: kmock.resource,
        kind: objects.Kind,
        watch: watching.Filter,
        *,
        since: str | None,
        initial_events: bool,
    ) -> list[bytes] | dict[str, Any]:
        """The lines a new watch starts with, or the ERROR event it gets instead (410 Expired)."""
        if since is None or initial_events:
            current = [key for key, obj in self.live_items(resource, watch.namespace) if watch.matches(obj)]
            lines = [watching.frame(watching.EventType.ADDED, self.encoded_live(key)) for key in current]
            if initial_events:
                bookmark = watching.initial_events_end(self.resource_version, kind.api_version, kind.kind)
                lines.append(watching.encode(bookmark) + b"\n")
            return lines
        if int(since) < self._compacted.get(resource, 0):
            return watching.expired(since)
        changes = self._changes.get(resource, ())
        replayed = ((watching.visible(c, watch), c) for c in changes if c.resource_version > int(since))
        return [watching.frame(type_, c.encoded) for type_, c in replayed if type_ is not None]


def _resource_id(resource: kmock.resource) -> tuple[str | None, ...]:
    """A hashable identity of `resource` (kmock's resources compare by group, version and plural)."""
    return (resource.group, resource.version, resource.plural)
