"""The pod subresources an API server implements itself: `pods/eviction` (under budgets) and `pods/binding`.

Both work on the `store.Store` under its lock, like the other writes of `server.FakeKubeAPI`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from karpy_emulator.apiserver import api_status, disruption, objects, store

PODS = kmock.resource("v1/pods")
PDBS = kmock.resource("policy/v1/poddisruptionbudgets")
_POD = objects.Kind("pods", "", "v1", "Pod", namespaced=True, status_subresource=True, custom=False)
_SCALED_KINDS = {
    "ReplicaSet": kmock.resource("apps/v1/replicasets"),
    "Deployment": kmock.resource("apps/v1/deployments"),
    "StatefulSet": kmock.resource("apps/v1/statefulsets"),
    "ReplicationController": kmock.resource("v1/replicationcontrollers"),
}


@dataclass(frozen=True, slots=True)
class Eviction:
    """One request to the Eviction API and the answer it got (201 evicted, 429 refused by a budget, ...)."""

    namespace: str
    name: str
    code: int
    at: float
    budgets: tuple[str, ...]

    @property
    def allowed(self) -> bool:
        return self.code == 201


async def evict(
    db: store.Store, namespace: str, name: str, *, now: float
) -> tuple[Eviction, api_status.ApiError | None]:
    """Evict the pod unless a budget forbids it: the record of the request, and the refusal to answer if any."""
    key: store.Key = (PODS, namespace, name)
    pod = db.live(key)
    if pod is None:
        raise api_status.not_found("pods", "", name)
    pdbs, pods = list(db.live_objects(PDBS, namespace)), list(db.live_objects(PODS, namespace))
    decision = disruption.decide(pod, pdbs, pods, lambda p: controller_scale(db, p))
    error = decision.error()
    record = Eviction(
        namespace, name, error.code if error is not None else 201, now, tuple(b.name for b in decision.budgets)
    )
    if error is None:
        await db.delete(key, pod)
    return record, error


def controller_scale(db: store.Store, pod: Mapping[str, Any]) -> tuple[str, int] | None:
    """The pod's scaling controller (a ReplicaSet's Deployment, a StatefulSet, ...) as (uid, spec.replicas)."""
    namespace = objects.metadata(pod).get("namespace")
    owner: Mapping[str, Any] | None = pod
    found: tuple[str, int] | None = None
    while owner is not None:
        ref = next((r for r in objects.metadata(owner).get("ownerReferences") or () if r.get("controller")), None)
        resource = _SCALED_KINDS.get((ref or {}).get("kind", ""))
        if ref is None or resource is None:
            return found
        owner = db.live((resource, namespace, str(ref.get("name"))))
        if owner is not None:
            found = (str(objects.metadata(owner).get("uid")), int((owner.get("spec") or {}).get("replicas", 1)))
    return found


async def bind(
    db: store.Store, namespace: str, name: str, body: Mapping[str, Any], *, clock: Callable[[], float]
) -> None:
    """Assign the pod to `target.name`: spec.nodeName and a PodScheduled=True condition, 409 if already bound."""
    node = (body.get("target") or {}).get("name")
    if not node:
        raise api_status.bad_request("a binding needs target.name")
    key: store.Key = (PODS, namespace, name)
    old = db.live(key)
    if old is None:
        raise api_status.not_found("pods", "", name)
    assigned = (old.get("spec") or {}).get("nodeName")
    if assigned:
        raise api_status.conflict("pods", "", name, f'pod {name} is already assigned to node "{assigned}"')
    if objects.metadata(old).get("deletionTimestamp"):
        raise api_status.conflict("pods", "", name, "pod is being deleted, cannot be assigned to a host")
    # A new spec and status; the containers, volumes, metadata and the other conditions are shared with `old`.
    status_ = dict(old.get("status") or {})
    conditions = [c for c in status_.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": objects.timestamp(clock())})
    status_["conditions"] = conditions
    bound = {**old, "spec": {**(old.get("spec") or {}), "nodeName": node}, "status": status_}
    result = objects.updated(old, bound, _POD, scope=objects.Scope.ALL, resource_version=db.resource_version + 1)
    if result is not None:
        await db.update(key, old, result)
