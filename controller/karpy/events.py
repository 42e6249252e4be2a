"""Kubernetes Events about the objects karpy acts on: the `Recorder` protocol, `KubeRecorder`, `MemoryRecorder`.

An event may carry a `Dedupe`: its values and timeout, as upstream's events do (core: pkg/events/recorder.go). A
recorder drops an event whose reason and dedupe values it took less than the timeout ago (`Deduplicator`), so the
controllers that publish them keep no memory of their own.

`KubeRecorder.record` never blocks and never fails: it queues. `run()` (or `flush()`) writes core/v1 Events
through the `KubeClient` protocol the way client-go's recorder does: a repeat of (object uid, reason, message)
bumps `count` and `lastTimestamp` on the existing Event instead of creating another, and a per-object token
bucket (burst 25, one more every 5 minutes: client-go's spam filter) keeps a hot loop from flooding the API.
No aiohttp here: only the protocol. Hand-written: `kopf.event` posts a new Event per call (no count bump, no spam
filter) and only while `kopf.operator` runs.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import datetime
import enum
import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from karpy import clock as karpy_clock
from karpy.kube import client, ratelimit, resources

log = logging.getLogger(__name__)

SPAM_BURST = 25
"""Events per involved object before the spam filter starts dropping (client-go EventSourceObjectSpamFilter)."""
SPAM_REFILL_SECONDS = 300.0
"""One more event per object is allowed every this many seconds once the burst is spent (client-go: 5 min)."""
CACHE_SIZE = 4096
"""Distinct (uid, reason, message) keys remembered for deduplication (least recently used are forgotten)."""
DEFAULT_DEDUPE_TIMEOUT = 120.0
"""Seconds an event with dedupe values is not repeated unless it names its own timeout (upstream: 2 minutes)."""
QUEUE_LIMIT = 1000
"""Distinct events waiting to be written; beyond it new ones are dropped (the API server is not keeping up)."""
_NAME_LIMIT = 200


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Dedupe:
    """Which repeats of an event are dropped: those with the same reason and `values` within `timeout` seconds."""

    values: tuple[str, ...]
    timeout: float = DEFAULT_DEDUPE_TIMEOUT

    def key(self, reason: str) -> str:
        """Upstream's key: the reason in lower case, then the values, joined by "-" (the message is not in it)."""
        return "-".join((reason.lower(), *self.values))


def about(obj: Mapping[str, Any], *values: str, timeout: float = DEFAULT_DEDUPE_TIMEOUT) -> Dedupe:
    """Deduplicate per object: its kind and uid (its namespace and name while it has none), then `values`."""
    meta = _meta(obj)
    identity = str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
    return Dedupe((str(obj.get("kind", "")), identity, *values), timeout)


class Deduplicator:
    """The dedupe keys taken recently, each until its timeout has passed (upstream's go-cache of keys)."""

    def __init__(self, clock: karpy_clock.Clock, *, limit: int = CACHE_SIZE) -> None:
        self._clock = clock
        self._limit = limit
        self._until: dict[str, float] = {}

    def admit(self, reason: str, dedupe: Dedupe | None) -> bool:
        """Whether the event goes out; an admitted one holds its key for its timeout."""
        if dedupe is None:
            return True
        now, key = self._clock.now(), dedupe.key(reason)
        if self._until.get(key, -math.inf) > now:
            return False
        if len(self._until) >= self._limit:
            self._until = {k: until for k, until in self._until.items() if until > now}
        self._until[key] = now + dedupe.timeout
        return True


class Recorder(Protocol):
    def record(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *, dedupe: Dedupe | None = None
    ) -> None:
        """Note an event about `obj` (a Kubernetes object dict with apiVersion, kind and metadata), unless
        `dedupe` says it was noted recently."""
        ...


@dataclass(frozen=True, slots=True)
class Recorded:
    kind: str
    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _recorded(obj: Mapping[str, Any], type_: str, reason: str, message: str) -> Recorded:
    meta = _meta(obj)
    return Recorded(
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        type=str(type_),
        reason=reason,
        message=message,
    )


class MemoryRecorder:
    """Keeps every event in order, for tests; with a clock it drops duplicates as `KubeRecorder` does."""

    def __init__(self, clock: karpy_clock.Clock | None = None) -> None:
        self.events: list[Recorded] = []
        self.refs: list[dict[str, Any]] = []
        """The object each event was recorded against, as given (what `involved_object` is made from)."""
        self._dedupe = Deduplicator(clock) if clock is not None else None

    def record(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *, dedupe: Dedupe | None = None
    ) -> None:
        if self._dedupe is not None and not self._dedupe.admit(reason, dedupe):
            return
        self.events.append(_recorded(obj, type_, reason, message))
        self.refs.append(copy.deepcopy(dict(obj)))

    def reasons(self, name: str | None = None) -> list[str]:
        """Reasons recorded (about the object called `name` only, if given), in order."""
        return [e.reason for e in self.events if name is None or e.name == name]

    def clear(self) -> None:
        self.events.clear()
        self.refs.clear()


def timestamp(epoch: float) -> str:
    """RFC 3339 in UTC with second precision, as core/v1 Event timestamps are serialized."""
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def involved_object(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = _meta(obj)
    ref = {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
    }
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = str(meta["resourceVersion"])
    return ref


def event_namespace(obj: Mapping[str, Any]) -> str:
    """Events live in the object's namespace; those about cluster-scoped objects in `default` (as client-go)."""
    return str(_meta(obj).get("namespace") or "default")


def build_event(
    obj: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    *,
    name: str,
    count: int,
    first: float,
    last: float,
    component: str,
    instance: str = "",
) -> dict[str, Any]:
    """The core/v1 Event body (pure)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": event_namespace(obj)},
        "involvedObject": involved_object(obj),
        "reason": reason,
        "message": message,
        "type": str(type_),
        "count": count,
        "firstTimestamp": timestamp(first),
        "lastTimestamp": timestamp(last),
        "source": {"component": component, **({"host": instance} if instance else {})},
        "reportingComponent": component,
        "reportingInstance": instance,
    }


@dataclass(slots=True)
class _Entry:
    obj: Mapping[str, Any]
    type: str
    reason: str
    message: str
    name: str
    count: int
    first: float
    last: float
    written: bool = False  # the Event exists on the API server, later repeats are patches


_Key = tuple[str, str, str]


class KubeRecorder:
    """Deduplicating, rate-limited Event writer; run `run()` as a task (or call `flush()`)."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        component: str = "karpenter",
        instance: str = "",
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        cache_size: int = CACHE_SIZE,
        queue_limit: int = QUEUE_LIMIT,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._component = component
        self._instance = instance
        self._burst = burst
        self._refill = refill_seconds
        self._cache_size = cache_size
        self._queue_limit = queue_limit
        self._entries: collections.OrderedDict[_Key, _Entry] = collections.OrderedDict()
        self._buckets: collections.OrderedDict[str, ratelimit.TokenBucket] = collections.OrderedDict()
        self._pending: dict[_Key, None] = {}
        self._serial = itertools.count()
        self._wake: asyncio.Event | None = None
        self._dedupe = Deduplicator(clock, limit=cache_size)
        self.dropped = 0
        """Events refused by the spam filter or a full queue (a counter for metrics)."""

    def record(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *, dedupe: Dedupe | None = None
    ) -> None:
        if not self._dedupe.admit(reason, dedupe):
            return
        meta = _meta(obj)
        uid = str(meta.get("uid") or f"{obj.get('kind')}/{meta.get('namespace', '')}/{meta.get('name', '')}")
        if not self._allow(uid):
            self.dropped += 1
            return
        key = (uid, reason, message)
        now = self._clock.now()
        entry = self._entries.get(key)
        if entry is None:
            if len(self._pending) >= self._queue_limit:
                self.dropped += 1
                return
            entry = _Entry(obj, str(type_), reason, message, self._new_name(obj), 1, now, now)
            self._entries[key] = entry
            while len(self._entries) > self._cache_size:
                old_key, _ = self._entries.popitem(last=False)
                self._pending.pop(old_key, None)
        else:
            entry.count += 1
            entry.last = now
            entry.obj = obj
            self._entries.move_to_end(key)
        self._pending[key] = None
        if self._wake is not None:
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> int:
        """Write every pending event (create or count bump); returns how many writes succeeded."""
        written = 0
        while self._pending:
            key = next(iter(self._pending))
            del self._pending[key]
            entry = self._entries.get(key)
            if entry is not None and await self._write(entry):
                written += 1
        return written

    async def run(self) -> None:
        """Write events as they come until cancelled."""
        self._wake = asyncio.Event()
        try:
            while True:
                if not self._pending:
                    await self._wake.wait()
                self._wake.clear()
                await self.flush()
        finally:
            self._wake = None

    # -- internals ----------------------------------------------------------------------------------------------

    def _allow(self, uid: str) -> bool:
        bucket = self._buckets.get(uid)
        if bucket is None:
            bucket = ratelimit.TokenBucket(1.0 / self._refill, self._burst, clock=self._clock)
            self._buckets[uid] = bucket
            while len(self._buckets) > self._cache_size:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(uid)
        return bucket.try_take()

    def _new_name(self, obj: Mapping[str, Any]) -> str:
        # client-go: "<object name>.<unix nanos in hex>"; the serial keeps names unique under a manual clock.
        base = str(_meta(obj).get("name") or "object")[:_NAME_LIMIT]
        return f"{base}.{int(self._clock.now() * 1e9):x}{next(self._serial):x}"

    def _body(self, entry: _Entry) -> dict[str, Any]:
        return build_event(
            entry.obj,
            entry.type,
            entry.reason,
            entry.message,
            name=entry.name,
            count=entry.count,
            first=entry.first,
            last=entry.last,
            component=self._component,
            instance=self._instance,
        )

    async def _write(self, entry: _Entry) -> bool:
        namespace = event_namespace(entry.obj)
        try:
            if entry.written:
                try:
                    bump = {"count": entry.count, "lastTimestamp": timestamp(entry.last)}
                    await self._kube.patch(resources.EVENTS, entry.name, bump, namespace=namespace)
                    return True
                except client.NotFound:  # the API server's event TTL removed it: start a new one
                    entry.name = self._new_name(entry.obj)
            await self._kube.create(resources.EVENTS, self._body(entry))
            entry.written = True
            return True
        except Exception as error:  # events are best effort: never let one break a reconciler
            log.warning("could not write event %s %s: %s", entry.reason, entry.name, error)
            return False
