"""`FakeKubeClient`: an in-memory `KubeClient` for tests and benchmarks, beside the fake cloud provider.

It answers as the API server does where the reconcilers depend on it: resourceVersions that move on every write and
guard merge patches (409 on a stale one), `generateName`, 409 AlreadyExists, the status subresource (a status write
changes only status, any other write never does), finalizers (a delete only sets deletionTimestamp until they are
gone), equality label and field selectors, evictions under PodDisruptionBudgets (upstream
`pkg/registry/core/pod/storage/eviction.go`: more than one budget is a 500, none left is a 429), bindings, and
watches replayed from its history (410 once `compact` dropped the version asked for).

Knobs (public attributes): `objects` (by (plural, namespace, name)), `writes` and `evictions` (what was asked, in
order), `next_create_error` (raised once by the next create), `crash_on` (the first write it returns True for raises
`Crash` *instead of* being applied, modelling a process that died right before that write; the hook is then cleared).
Must not be wired into the controller: only tests, benchmarks and offline tools build it.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock as karpy_clock
from karpy.api import decoding
from karpy.kube import client, patches, resources

Key = tuple[str, str, str]
"""(plural, namespace, name); the namespace is "" for cluster-scoped objects."""

Follower = Callable[[resources.Resource, client.WatchEvent], None]
"""What `FakeKubeClient.follow` calls with each change."""


class Crash(Exception):
    """The controller process died here (raised by `crash_on`)."""


@dataclass(frozen=True, slots=True)
class Write:
    verb: str  # create | patch | delete | evict | bind
    plural: str
    name: str
    body: Any = None
    subresource: str = ""


@dataclass(frozen=True, slots=True)
class _Change:
    resource_version: int
    plural: str
    namespace: str
    event: client.WatchEvent


class FakeKubeClient:
    """See the module docstring. Deterministic: resourceVersions and generated names come from counters."""

    def __init__(self, clock: karpy_clock.Clock) -> None:
        self.clock = clock
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[Write] = []
        self.evictions: list[tuple[str, str, client.EvictionOutcome]] = []
        self.crash_on: Callable[[Write], bool] | None = None
        self.next_create_error: Exception | None = None
        self._latest = 99
        """The resourceVersion of the last write (the first object gets 100)."""
        self._generated = itertools.count(1)
        self._history: list[_Change] = []
        self._compacted_at = 0
        """Changes up to this resourceVersion are forgotten (`compact`)."""
        self._changed = asyncio.Event()
        self._followers: list[tuple[dict[str, resources.Resource], Follower]] = []

    # --- test helpers -------------------------------------------------------------------------------------------

    def put(self, res: resources.Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store `obj` as is (no admission, no write recorded), with a fresh resourceVersion, a uid and a
        creationTimestamp unless it has them; returns the stored object itself."""
        body = copy.deepcopy(dict(obj))
        md = body.setdefault("metadata", {})
        md.setdefault("uid", f"uid-{md['name']}")
        md.setdefault("creationTimestamp", decoding.format_timestamp(self.clock.now()))
        key = (res.plural, md.get("namespace", ""), md["name"])
        self._store(key, body, client.MODIFIED if key in self.objects else client.ADDED)
        return body

    def obj(self, res: resources.Resource, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The stored object itself (not a copy), or None."""
        return self.objects.get((res.plural, namespace, name))

    def all(self, res: resources.Resource) -> list[dict[str, Any]]:
        """Every stored object of `res`, ordered by namespace and name."""
        return [o for (plural, _, _), o in sorted(self.objects.items()) if plural == res.plural]

    def follow(self, apply: Follower, *informed: resources.Resource) -> None:
        """Hand `apply` every stored object of `informed` now (ADDED), then each change to them as it is made: an
        informer with no lag, for reconcilers that read a cache (`state.cluster.Cluster.apply` fits) in tests with no
        event-loop turn between a write and the next read. `put` feeds it too; editing a stored object in place does
        not (the cache then lags, as a real one may)."""
        by_plural = {res.plural: res for res in informed}
        for res in informed:
            for obj in self.all(res):
                apply(res, client.WatchEvent(client.ADDED, copy.deepcopy(obj)))
        self._followers.append((by_plural, apply))

    def compact(self) -> None:
        """Forget the change history, as etcd compaction does: a watch from an older resourceVersion gets 410."""
        self._compacted_at = self._latest
        self._history.clear()

    # --- KubeClient ---------------------------------------------------------------------------------------------

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        found = self.obj(res, name, namespace)
        return copy.deepcopy(found) if found is not None else None

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        wanted_labels = _equalities(label_selector)
        wanted_fields = _equalities(field_selector)
        found = [
            copy.deepcopy(obj)
            for (plural, ns, _), obj in sorted(self.objects.items())
            if plural == res.plural
            and (not namespace or ns == namespace)
            and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in wanted_labels)
            and all(_field(obj, path) == value for path, value in wanted_fields)
        ]
        return found, str(self._latest)

    async def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        cursor = int(resource_version or self._latest)
        if cursor < self._compacted_at:
            raise client.Expired(410, "Expired", f"too old resource version: {cursor}")
        deadline = self.clock.now() + timeout_seconds
        while True:
            for change in [c for c in self._history if c.resource_version > cursor]:
                cursor = change.resource_version
                if change.plural == res.plural and (not namespace or change.namespace == namespace):
                    yield client.WatchEvent(change.event.type, copy.deepcopy(dict(change.event.object)))
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                return
            await self._next_change_or_sleep(remaining)

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        md = dict(body["metadata"])
        if not md.get("name"):
            md["name"] = f"{md['generateName']}{next(self._generated):05d}"
        named = {**body, "metadata": md}
        self._record(Write("create", res.plural, md["name"], named))
        if self.next_create_error is not None:
            error, self.next_create_error = self.next_create_error, None
            raise error
        if self.obj(res, md["name"], md.get("namespace", "")) is not None:
            raise client.AlreadyExists(409, "AlreadyExists", f'{res} "{md["name"]}" already exists')
        return copy.deepcopy(self.put(res, named))

    async def patch(
        self, res: resources.Resource, name: str, patch: client.Patch, *, namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        self._record(Write("patch", res.plural, name, copy.deepcopy(patch), subresource))
        key = (res.plural, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise client.NotFound(404, "NotFound", f'{res} "{name}" not found')
        if isinstance(patch, Mapping):
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                raise client.Conflict(409, "Conflict", "the object has been modified; please apply your changes")
            patched = patches.merge_patch(current, patch)
        else:
            try:
                patched = patches.json_patch(current, list(patch))
            except patches.PatchError as error:
                raise client.Invalid(422, "Invalid", str(error)) from error
        # The status subresource writes status only; the object itself never writes status (and never moves uid).
        updated = copy.deepcopy(current) if subresource == "status" else dict(patched)
        updated.pop("status", None)
        if (subresource == "status" and "status" in patched) or (subresource != "status" and "status" in current):
            updated["status"] = copy.deepcopy(patched["status"] if subresource == "status" else current["status"])
        updated["metadata"] = {**updated["metadata"], "uid": current["metadata"]["uid"]}
        md = updated["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            self._remove(key, updated)
        else:
            self._store(key, updated, client.MODIFIED)
        return copy.deepcopy(updated)

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        self._record(Write("delete", res.plural, name, grace_period_seconds))
        key = (res.plural, namespace, name)
        current = self.objects.get(key)
        if current is None:
            return False
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp"):
                deleting = copy.deepcopy(current)
                deleting["metadata"]["deletionTimestamp"] = decoding.format_timestamp(self.clock.now())
                self._store(key, deleting, client.MODIFIED)
        else:
            self._remove(key, current)
        return True

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        self._record(Write("evict", resources.PODS.plural, name))
        pod = self.obj(resources.PODS, name, namespace)
        outcome = self._eviction(namespace, pod)
        if pod is not None and outcome is client.EvictionOutcome.EVICTED:
            self._remove((resources.PODS.plural, namespace, name), pod)
        self.evictions.append((namespace, name, outcome))
        return outcome

    async def bind(self, namespace: str, name: str, node: str) -> None:
        self._record(Write("bind", resources.PODS.plural, name, node))
        key = (resources.PODS.plural, namespace, name)
        pod = self.objects.get(key)
        if pod is None:
            raise client.NotFound(404, "NotFound", f'pods "{name}" not found')
        if (pod.get("spec") or {}).get("nodeName"):
            raise client.Conflict(409, "Conflict", f"pod {name} is already assigned to node {pod['spec']['nodeName']}")
        bound = copy.deepcopy(pod)
        bound.setdefault("spec", {})["nodeName"] = node
        self._store(key, bound, client.MODIFIED)

    # --- internals ----------------------------------------------------------------------------------------------

    def _record(self, write: Write) -> None:
        self.writes.append(write)
        if self.crash_on is not None and self.crash_on(write):
            self.crash_on = None
            raise Crash(f"crash before {write.verb} {write.plural}/{write.name}")

    def _store(self, key: Key, obj: dict[str, Any], kind: str) -> None:
        self._latest += 1
        obj["metadata"]["resourceVersion"] = str(self._latest)
        self.objects[key] = obj
        self._changed_to(key, client.WatchEvent(kind, copy.deepcopy(obj)))

    def _remove(self, key: Key, last: Mapping[str, Any]) -> None:
        del self.objects[key]
        gone = copy.deepcopy(dict(last))
        self._latest += 1
        gone["metadata"]["resourceVersion"] = str(self._latest)
        self._changed_to(key, client.WatchEvent(client.DELETED, gone))

    def _changed_to(self, key: Key, event: client.WatchEvent) -> None:
        self._history.append(_Change(self._latest, key[0], key[1], event))
        for by_plural, apply in self._followers:
            if key[0] in by_plural:
                apply(by_plural[key[0]], client.WatchEvent(event.type, copy.deepcopy(dict(event.object))))
        self._changed.set()
        self._changed = asyncio.Event()

    async def _next_change_or_sleep(self, seconds: float) -> None:
        """Wake on the next write or after `seconds` on the injected clock, whichever comes first."""
        changed = asyncio.ensure_future(self._changed.wait())
        slept = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait((changed, slept), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (changed, slept):
                waiter.cancel()
            await asyncio.gather(changed, slept, return_exceptions=True)

    def _eviction(self, namespace: str, pod: Mapping[str, Any] | None) -> client.EvictionOutcome:
        if pod is None:
            return client.EvictionOutcome.NOT_FOUND
        pod_labels = pod["metadata"].get("labels") or {}
        budgets = [
            p
            for (plural, ns, _), p in self.objects.items()
            if plural == resources.PDBS.plural and ns == namespace and _selects(p["spec"].get("selector"), pod_labels)
        ]
        if len(budgets) > 1:
            return client.EvictionOutcome.FAILED
        if not budgets:
            return client.EvictionOutcome.EVICTED
        spec = budgets[0]["spec"]
        members = [
            p
            for (plural, ns, _), p in self.objects.items()
            if plural == resources.PODS.plural
            and ns == namespace
            and _selects(spec["selector"], p["metadata"].get("labels") or {})
        ]
        healthy = sum(1 for p in members if not p["metadata"].get("deletionTimestamp") and _ready(p))
        if "minAvailable" in spec:
            allowed = healthy - int(spec["minAvailable"])
        else:
            allowed = int(spec["maxUnavailable"]) - (len(members) - healthy)
        return client.EvictionOutcome.EVICTED if allowed > 0 else client.EvictionOutcome.BLOCKED


def _equalities(selector: str) -> list[tuple[str, str]]:
    """`a=b,c==d` as pairs; the only selector forms the reconcilers send."""
    pairs = []
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        pairs.append((key, value.removeprefix("=")))
    return pairs


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return "" if cur is None else str(cur)


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """policy/v1: a null selector selects nothing; matchLabels must all match."""
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
