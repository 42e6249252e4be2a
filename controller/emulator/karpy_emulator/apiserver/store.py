"""Persistence of the emulated API server: kmock's object store plus what etcd and the watch cache add.

A global resourceVersion counter, per-resource change history for watches resuming from a version (410 Expired
once compacted), deletion through finalizers, and the watch streams themselves. Callers hold `lock` around reads
that lead to writes; `watch` takes it itself to snapshot and subscribe atomically.

Every stored version is encoded as JSON once, when it is written (`encoded`): lists, reads and every watcher's
event reuse those bytes instead of serialising the same object again per reader. Stored versions are never changed
in place (every write stores a new dict), which is what makes that cache valid, and what lets a write share the
parts it did not change with the version before (`objects.updated`) instead of copying the whole object.

What a read costs grows with what it returns, not with the store: a LIST walks its resource's keys already in LIST
order (`ordered`, kept sorted on write, as etcd and the watch cache keep keys), and an in-process reader that keeps
its own copy (`karpy_emulator.informers.Cache`) asks only for the changes since the revision it last saw
(`changes_since`), the way an informer resumes its watch instead of listing again.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import kmock

from karpy import clock as karpy_clock
from karpy_emulator.apiserver import deliveries, kmock_private, objects, ordered, watching

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
        activity: karpy_clock.Activity = karpy_clock.UNTRACKED,
    ) -> None:
        self.objects = objects_
        self._stored = kmock_private.stored_objects(objects_)  # kmock's own dict: a lookup without its key parsing
        self.lock = lock
        self._buses = buses
        self._clock = clock
        self._watch_history = watch_history
        self._object_history = object_history
        self.resource_version = 1  # etcd starts an empty cluster at revision 1
        # Per resource (`_resource_id`): its latest changes, oldest first, and the revision of the last one dropped.
        self._changes: dict[ResourceId, collections.deque[watching.Change]] = {}
        self._compacted: dict[ResourceId, int] = {}
        self._encoded: dict[Key, tuple[object, dict[str, Any], bytes]] = {}  # key -> (kmock version, its dict, JSON)
        # The live keys of each resource, in creation order: a LIST or a watch's initial state walks only its own
        # resource's objects instead of every object ever stored (kmock keeps deleted ones too).
        self._live_keys: dict[ResourceId, dict[Key, None]] = {}
        self._ordered: dict[ResourceId, ordered.OrderedKeys[Key]] = {}  # the same keys, in LIST order
        # The revision of each resource's last change, by group and plural (whatever version it was written in):
        # what lets the emulated control plane's stand-ins skip a pass when nothing they read has changed.
        self._changed_at: dict[tuple[str | None, str | None], int] = {}
        self._closing = False
        # What each open watch stream still owes its client, by resource: busy on `activity` (see `deliveries`).
        self._activity = activity
        self._owed: dict[kmock.resource, set[deliveries.Owed]] = {}

    # -- reads --------------------------------------------------------------------------------------------------

    def live(self, key: Key) -> dict[str, Any] | None:
        """The stored object (a shallow copy: copy deeply before changing it), or None."""
        stored = self._stored.get(key)
        return None if stored is None or stored.deleted else stored.last.raw

    def changed_at(self, resource: kmock.resource) -> int:
        """The revision of the last write to any object of `resource` (0: none since the store started)."""
        return self._changed_at.get((resource.group, resource.plural), 0)

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
            stored = self._stored.get(key)  # None: taken out of kmock's store directly (tests play a vanished object)
            if stored is not None and not stored.deleted:
                yield key, stored.last.raw

    def listed(
        self, resource: kmock.resource, namespace: str | None = None, *, after: ordered.Position | None = None
    ) -> Iterator[tuple[Key, dict[str, Any]]]:
        """`live_items` in a LIST's order (namespace, then name), from the order kept on write: no sort per read;
        past `after` only, when given (a paginated LIST's next page)."""
        found = self._ordered.get(_resource_id(resource))
        if found is None:
            return
        for key in found.in_order(namespace, after=after):
            obj = self._current(key)
            if obj is not None:
                yield key, obj

    def _current(self, key: Key) -> dict[str, Any] | None:
        """The live object at `key`, or None: the dict last stored through this store (never copied) while it is
        what kmock holds, else kmock's latest version (a test stored or removed one through kmock directly)."""
        stored = self._stored.get(key)
        version = kmock_private.latest(stored) if stored is not None else None
        if version is None:
            return None
        cached = self._encoded.get(key)
        if cached is not None and cached[0] is version:
            return cached[1]
        raw: dict[str, Any] = version.raw
        return raw

    def changes_since(self, resource: kmock.resource, revision: int) -> list[watching.Change] | None:
        """Every change to `resource` after `revision`, oldest first; None when they are no longer all kept (older
        than `watch_history` changes, or a revision this store never reached): the reader must list again, as an
        informer whose watch got 410 Expired does."""
        if not self.holds(resource, revision):
            return None
        found: list[watching.Change] = []
        for change in reversed(self._changes.get(_resource_id(resource), ())):
            if change.resource_version <= revision:
                break
            found.append(change)
        found.reverse()
        return found

    def holds(self, resource: kmock.resource, revision: int) -> bool:
        """Whether every change to `resource` after `revision` is still kept: not compacted, and not a revision this
        store never reached. A watch or a LIST continued from a revision it does not hold gets 410 Expired."""
        return self._compacted.get(_resource_id(resource), 0) <= revision <= self.resource_version

    def encoded(self, key: Key) -> bytes | None:
        """The live object at `key` as JSON (encoded once per stored version), or None when absent."""
        stored = self._stored.get(key)
        if stored is None or stored.deleted:
            return None
        return self.encoded_live(key)

    def encoded_live(self, key: Key) -> bytes:
        """`encoded` of a key known to be live (e.g. from `live_items`)."""
        version = self._stored[key].last
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
            marked = objects.with_metadata(
                old,
                deletionTimestamp=objects.timestamp(self._clock()),
                deletionGracePeriodSeconds=0,
                resourceVersion=str(self.resource_version + 1),
            )
            return await self.update(key, old, marked), False
        final = objects.with_metadata(old, resourceVersion=str(self.next_version()))
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
        rid = _resource_id(key[0])
        self._live_keys.setdefault(rid, {})[key] = None
        self._ordered.setdefault(rid, ordered.OrderedKeys()).add(position(key), key)
        return encoded

    def _gone(self, key: Key) -> None:
        self.objects[key].delete()
        self._encoded.pop(key, None)
        rid = _resource_id(key[0])
        self._live_keys.get(rid, {}).pop(key, None)
        if (keys := self._ordered.get(rid)) is not None:
            keys.discard(position(key))

    async def _publish(self, resource: kmock.resource, change: watching.Change) -> None:
        rid = _resource_id(resource)
        changes = self._changes.setdefault(rid, collections.deque(maxlen=self._watch_history))
        if len(changes) == changes.maxlen:
            self._compacted[rid] = changes[0].resource_version
        changes.append(change)
        self._changed_at[(resource.group, resource.plural)] = change.resource_version
        for owed in self._owed.get(resource, ()):
            owed.add()
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
        owed = deliveries.Owed(self._activity)
        async with self.lock:  # no write between the snapshot and the mark
            mark = await bus.mark()
            backlog = self._backlog(resource, kind, watch, since=since, initial_events=initial_events)
            self._owed.setdefault(resource, set()).add(owed)
        try:
            if isinstance(backlog, dict):  # an ERROR event ends the stream
                yield watching.encode(backlog) + b"\n"
                return
            owed.add(len(backlog))
            for line in backlog:
                # Settled as the line is handed over: the server writes it to the connection before it asks for
                # the next one (a write that fails ends the stream, and what it owed with it).
                owed.settle()
                yield line
            async with asyncio.timeout(lifetime):  # ?timeoutSeconds=
                async for change in bus.stream(since=mark):
                    if change is None:
                        return
                    type_ = watching.visible(change, watch)
                    owed.settle()
                    if type_ is not None:
                        yield watching.frame(type_, change.encoded)
        except TimeoutError:
            return
        finally:
            self._owed[resource].discard(owed)
            owed.release()
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
        rid = _resource_id(resource)
        if int(since) < self._compacted.get(rid, 0):
            return watching.expired(since)
        changes = self._changes.get(rid, ())
        replayed = ((watching.visible(c, watch), c) for c in changes if c.resource_version > int(since))
        return [watching.frame(type_, c.encoded) for type_, c in replayed if type_ is not None]


ResourceId = tuple[str | None, str | None, str | None]


def _resource_id(resource: kmock.resource) -> ResourceId:
    """A hashable identity of `resource` (kmock's resources compare by group, version and plural)."""
    return (resource.group, resource.version, resource.plural)


def position(key: Key) -> ordered.Position:
    return (key[1] or "", key[2])
