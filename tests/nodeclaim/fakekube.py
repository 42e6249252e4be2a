"""An in-memory `KubeClient` for reconciler tests: finalizers and deletionTimestamps, merge patches with
resourceVersion preconditions, the status subresource, selectors, and evictions under PodDisruptionBudgets.

`crash_on` injects a crash: the first write for which it returns True raises `Crash` *instead of* being applied
(so the test models a process dying right before that write) and the hook is cleared.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.api import decoding
from karpy.kube import client, patches, resources


class Crash(Exception):
    """The controller process died here."""


@dataclass(frozen=True, slots=True)
class Write:
    verb: str  # create | patch | delete | evict
    plural: str
    name: str
    body: Any = None
    subresource: str = ""


Key = tuple[str, str, str]


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return "" if cur is None else str(cur)


def _selected(labels: Mapping[str, str], selector: Mapping[str, Any] | None) -> bool:
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


class FakeKube:
    def __init__(self, clock: clock_mod.Clock) -> None:
        self.clock = clock
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[Write] = []
        self.evictions: list[tuple[str, str, client.EvictionOutcome]] = []
        self.crash_on: Callable[[Write], bool] | None = None
        self._rv = itertools.count(100)

    # --- test helpers -------------------------------------------------------------------------------------------

    def put(self, res: resources.Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(dict(obj))
        md = body.setdefault("metadata", {})
        md["resourceVersion"] = str(next(self._rv))
        md.setdefault("uid", f"uid-{md['name']}")
        md.setdefault("creationTimestamp", decoding.format_timestamp(self.clock.now()))
        self.objects[(res.plural, md.get("namespace", ""), md["name"])] = body
        return body

    def obj(self, res: resources.Resource, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.objects.get((res.plural, namespace, name))

    def all(self, res: resources.Resource) -> list[dict[str, Any]]:
        return [o for (plural, _, _), o in sorted(self.objects.items()) if plural == res.plural]

    def _check_crash(self, write: Write) -> None:
        self.writes.append(write)
        if self.crash_on is not None and self.crash_on(write):
            self.crash_on = None
            raise Crash(f"crash before {write.verb} {write.plural}/{write.name}")

    # --- KubeClient ---------------------------------------------------------------------------------------------

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        found = self.obj(res, name, namespace)
        return copy.deepcopy(found) if found is not None else None

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        out = []
        for (plural, ns, _), obj in sorted(self.objects.items()):
            if plural != res.plural or (namespace and ns != namespace):
                continue
            fields = [f.split("=", 1) for f in field_selector.split(",") if f]
            if any(_field(obj, path) != value for path, value in fields):
                continue
            wanted = [s.split("=", 1) for s in label_selector.split(",") if s]
            obj_labels = obj.get("metadata", {}).get("labels") or {}
            if any(obj_labels.get(k) != v for k, v in wanted):
                continue
            out.append(copy.deepcopy(obj))
        return out, str(next(self._rv))

    def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        raise NotImplementedError("the reconciler tests do not watch")

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._check_crash(Write("create", res.plural, name, body))
        if self.obj(res, name, body["metadata"].get("namespace", "")) is not None:
            raise client.AlreadyExists(409, "AlreadyExists", f"{res.plural} {name} exists")
        return copy.deepcopy(self.put(res, body))

    async def patch(
        self,
        res: resources.Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        self._check_crash(Write("patch", res.plural, name, copy.deepcopy(patch), subresource))
        key = (res.plural, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise client.NotFound(404, "NotFound", f"{res.plural} {name} not found")
        if not isinstance(patch, Mapping):
            raise NotImplementedError("JSON patch")
        body = dict(patch)
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv is not None and wanted_rv != current["metadata"]["resourceVersion"]:
            raise client.Conflict(409, "Conflict", "the object has been modified")
        if subresource == "status":
            body = {"status": body.get("status")}
        else:
            body.pop("status", None)
        if "metadata" in body:
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        updated = patches.merge_patch(current, body)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        md = updated["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            del self.objects[key]
        else:
            self.objects[key] = updated
        return copy.deepcopy(updated)

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        self._check_crash(Write("delete", res.plural, name, grace_period_seconds))
        key = (res.plural, namespace, name)
        current = self.objects.get(key)
        if current is None:
            return False
        md = current["metadata"]
        if md.get("finalizers"):
            md.setdefault("deletionTimestamp", decoding.format_timestamp(self.clock.now()))
            md["resourceVersion"] = str(next(self._rv))
        else:
            del self.objects[key]
        return True

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        self._check_crash(Write("evict", "pods", name))
        pod = self.obj(resources.PODS, name, namespace)
        outcome = self._eviction(namespace, pod)
        if outcome is client.EvictionOutcome.EVICTED:
            del self.objects[("pods", namespace, name)]
        self.evictions.append((namespace, name, outcome))
        return outcome

    def _eviction(self, namespace: str, pod: Mapping[str, Any] | None) -> client.EvictionOutcome:
        if pod is None:
            return client.EvictionOutcome.NOT_FOUND
        pod_labels = pod["metadata"].get("labels") or {}
        pdbs = [
            p
            for (plural, ns, _), p in self.objects.items()
            if plural == "poddisruptionbudgets" and ns == namespace and _selected(pod_labels, p["spec"].get("selector"))
        ]
        if len(pdbs) > 1:
            return client.EvictionOutcome.FAILED
        if not pdbs:
            return client.EvictionOutcome.EVICTED
        spec = pdbs[0]["spec"]
        members = [
            p
            for (plural, ns, _), p in self.objects.items()
            if plural == "pods" and ns == namespace and _selected(p["metadata"].get("labels") or {}, spec["selector"])
        ]
        healthy = sum(
            1
            for p in members
            if not p["metadata"].get("deletionTimestamp")
            and any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions", ()))
        )
        if "minAvailable" in spec:
            allowed = healthy - int(spec["minAvailable"])
        else:
            allowed = int(spec["maxUnavailable"]) - (len(members) - healthy)
        return client.EvictionOutcome.EVICTED if allowed > 0 else client.EvictionOutcome.BLOCKED

    async def bind(self, namespace: str, name: str, node: str) -> None:
        raise NotImplementedError("the reconciler tests do not bind")


class Recorder:
    """Collects Events as (kind, name, type, reason, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str, str]] = []
        self.refs: list[dict[str, Any]] = []
        """The object each event was recorded against, as given (what the Event's involvedObject is made from)."""

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        md = obj.get("metadata") or {}
        self.events.append((str(obj.get("kind", "")), str(md.get("name", "")), type_, reason, message))
        self.refs.append(copy.deepcopy(dict(obj)))

    def reasons(self) -> list[str]:
        return [e[3] for e in self.events]
