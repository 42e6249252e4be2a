"""Persistence of the emulated API server: kmock's object store plus what etcd and the watch cache add.

A global resourceVersion counter, per-resource change history for watches resuming from a version (410 Expired
once compacted), deletion through finalizers, and the watch streams themselves. Callers hold `lock` around reads
that lead to writes; `watch` takes it itself to snapshot and subscribe atomically.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import kmock
from kmock._internal import aiobus  # kmock 0.8 leaves Bus out of __all__

from karpy.sim.kube import objects, watching

Key = tuple[kmock.resource, str | None, str]


class Store:
    def __init__(
        self,
        objects_: kmock.ObjectsArray,
        buses: dict[kmock.resource, aiobus.Bus[Any]],
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
        self._closing = False

    # -- reads --------------------------------------------------------------------------------------------------

    def live(self, key: Key) -> dict[str, Any] | None:
        """The stored object (a shallow copy: copy deeply before changing it), or None."""
        if key not in self.objects:
            return None
        stored = self.objects[key]
        return None if stored.deleted else stored.last.raw

    def live_objects(self, resource: kmock.resource, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        for (res, ns, _), stored in self.objects.items():
            if res == resource and not stored.deleted and (namespace is None or ns == namespace):
                yield stored.last.raw

    # -- writes (under the lock) --------------------------------------------------------------------------------

    def next_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    async def add(self, key: Key, obj: dict[str, Any]) -> None:
        """Store a created object whose resourceVersion is `next_version()`."""
        self.next_version()
        self._put(key, obj)
        await self._publish(key[0], watching.Change(watching.EventType.ADDED, self.resource_version, obj))

    async def update(self, key: Key, old: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """Store `result` (stamped with the next version); deletes it when its last finalizer went away."""
        self.next_version()
        self._put(key, result)
        meta = objects.metadata(result)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects[key].delete()
            await self._publish(key[0], watching.Change(watching.EventType.DELETED, self.resource_version, result))
        else:
            change = watching.Change(watching.EventType.MODIFIED, self.resource_version, result, old)
            await self._publish(key[0], change)
        return result

    async def delete(self, key: Key, old: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Delete now, or mark deleting when finalizers hold the object; returns (object, whether it is gone)."""
        meta = objects.metadata(old)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old, False
            marked = copy.deepcopy(old)
            marked["metadata"].update(deletionTimestamp=objects.timestamp(self._clock()), deletionGracePeriodSeconds=0)
            marked["metadata"]["resourceVersion"] = str(self.resource_version + 1)
            return await self.update(key, old, marked), False
        final = copy.deepcopy(old)
        final["metadata"]["resourceVersion"] = str(self.next_version())
        self._put(key, final)
        self.objects[key].delete()
        await self._publish(key[0], watching.Change(watching.EventType.DELETED, self.resource_version, final))
        return final, True

    def _put(self, key: Key, obj: dict[str, Any]) -> None:
        if key not in self.objects:
            self.objects[key] = obj
            return
        history = self.objects[key].history
        history.append(obj)
        if self._object_history is not None and len(history) > self._object_history:
            del history[: len(history) - self._object_history]

    async def _publish(self, resource: kmock.resource, change: watching.Change) -> None:
        changes = self._changes.setdefault(resource, collections.deque(maxlen=self._watch_history))
        if len(changes) == changes.maxlen:
            self._compacted[resource] = changes[0].resource_version
        changes.append(change)
        await self._buses[resource].put(change)

    # -- watches ------------------------------------------------------------------------------------------------

    async def close_watches(self) -> None:
        """End every open watch stream, so that the server can stop without waiting for clients."""
        self._closing = True
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
    ) -> AsyncIterator[Any]:
        yield b""  # sends the headers now: a watch on a quiet resource must still start
        if self._closing:
            return
        bus = self._buses[resource]
        async with self.lock:  # no write between the snapshot and the mark
            mark = await bus.mark()
            backlog = self._backlog(resource, kind, watch, since=since, initial_events=initial_events)
        try:
            for event in backlog:
                yield event
            if backlog and backlog[-1]["type"] == watching.EventType.ERROR:
                return
            async with asyncio.timeout(lifetime):  # ?timeoutSeconds=
                async for change in bus.stream(since=mark):
                    if change is None:
                        return
                    visible = watching.translate(change, watch)
                    if visible is not None:
                        yield visible
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
    ) -> list[dict[str, Any]]:
        if since is None or initial_events:
            current = [obj for obj in self.live_objects(resource, watch.namespace) if watch.matches(obj)]
            events = [watching.event(watching.EventType.ADDED, obj) for obj in current]
            if initial_events:
                events.append(watching.initial_events_end(self.resource_version, kind.api_version, kind.kind))
            return events
        if int(since) < self._compacted.get(resource, 0):
            return [watching.expired(since)]
        changes = self._changes.get(resource, ())
        replayed = (watching.translate(c, watch) for c in changes if c.resource_version > int(since))
        return [event for event in replayed if event is not None]
