"""A stand-in for kube-controller-manager's disruption controller: keeps every PodDisruptionBudget's status current.

On the ticks (every `interval` seconds) after a write to PDBs, pods or their controllers, it computes, for each
PDB, what upstream's `pkg/controller/disruption` writes — `observedGeneration`, `expectedPods`, `currentHealthy`,
`desiredHealthy`, `disruptionsAllowed` and the
`DisruptionAllowed` condition (`SufficientPods` / `InsufficientPods`) — from the pods of its namespace and their
controllers' desired replicas, with the Eviction API's own arithmetic (`karpy_emulator.apiserver.disruption.budget`),
and writes the status subresource only when something changed. Node autoscalers read `status.disruptionsAllowed` to
decide which nodes they may drain; without this stand-in it would stay absent (0) in the emulation.

Not emulated: `status.disruptedPods` (the emulated Eviction API decides from the live pods, not from this status).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy.api import decoding
from karpy.kube import client, resources
from karpy_emulator import informers, loop, reads, workloads
from karpy_emulator.apiserver import disruption

log = logging.getLogger(__name__)

STATEFULSETS = resources.Resource("apps", "v1", "statefulsets", "StatefulSet", True)
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
_SCALED: Mapping[str, resources.Resource] = {
    "ReplicaSet": workloads.REPLICASETS,
    "Deployment": workloads.DEPLOYMENTS,
    "StatefulSet": STATEFULSETS,
}
_COUNTS = ("observedGeneration", "expectedPods", "currentHealthy", "desiredHealthy", "disruptionsAllowed")

OwnerIndex = Mapping[tuple[str, str, str], Mapping[str, Any]]
"""(kind, namespace, name) -> a scaling controller (ReplicaSet, Deployment, StatefulSet)."""


@dataclass(slots=True)
class PDBReport:
    written: list[str] = field(default_factory=list)  # "ns/name" of the PDBs whose status changed


def scale_from(owners: OwnerIndex) -> disruption.Scale:
    """The Eviction API's `Scale` over listed controllers: a pod's top-most scaling controller as (uid, replicas),
    following controller references (pod → ReplicaSet → Deployment); None for a pod without one."""

    def scale(pod: Mapping[str, Any]) -> tuple[str, int] | None:
        namespace = str(informers.meta(pod).get("namespace") or "")
        owner: Mapping[str, Any] | None = pod
        found: tuple[str, int] | None = None
        while owner is not None:
            ref = next((r for r in informers.meta(owner).get("ownerReferences") or () if r.get("controller")), None)
            if ref is None or ref.get("kind") not in _SCALED:
                return found
            owner = owners.get((str(ref["kind"]), namespace, str(ref.get("name"))))
            if owner is not None:
                found = (str(informers.meta(owner).get("uid")), int((owner.get("spec") or {}).get("replicas", 1)))
        return found

    return scale


def status_for(
    pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], scale: disruption.Scale, *, now: float
) -> dict[str, Any]:
    """The status the disruption controller writes for `pdb` given all pods of its namespace (pure).

    The condition keeps its lastTransitionTime while its status stays the same, as `meta.SetStatusCondition` does.
    A budget that cannot be computed (an invalid int-or-percent) fails safe as upstream's `failSafe`: no disruption
    allowed, reason `SyncFailed`, the other counts as they were.
    """
    generation = int(informers.meta(pdb).get("generation") or 0)
    try:
        budget = disruption.budget(pdb, pods, scale)
    except ValueError as error:
        current = pdb.get("status") or {}
        counts = {key: current.get(key, 0) for key in _COUNTS} | {"disruptionsAllowed": 0}
        return counts | {"conditions": [_allowed_condition(pdb, generation, SYNC_FAILED, str(error), now=now)]}
    allowed = budget.disruptions_allowed
    reason = SUFFICIENT_PODS if allowed > 0 else INSUFFICIENT_PODS
    return {
        "observedGeneration": generation,
        "expectedPods": budget.expected_pods,
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "disruptionsAllowed": allowed,
        "conditions": [_allowed_condition(pdb, generation, reason, "", now=now)],
    }


def _allowed_condition(
    pdb: Mapping[str, Any], generation: int, reason: str, message: str, *, now: float
) -> dict[str, Any]:
    status = "True" if reason == SUFFICIENT_PODS else "False"
    previous = _condition(pdb)
    since = (previous or {}).get("lastTransitionTime")
    if previous is None or previous.get("status") != status or not since:
        since = decoding.format_timestamp(now)
    return {
        "type": DISRUPTION_ALLOWED,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def changed(pdb: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether writing `status` would change what `pdb` says (the counts or the condition's status or reason)."""
    current = pdb.get("status") or {}
    if any(current.get(key) != status.get(key) for key in _COUNTS):
        return True
    before, after = _condition(pdb) or {}, status["conditions"][0]
    return any(before.get(key) != after.get(key) for key in ("status", "reason", "observedGeneration"))


def _condition(pdb: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conditions = (pdb.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == DISRUPTION_ALLOWED), None)


def _namespace_of(obj: Mapping[str, Any]) -> list[str]:
    return [str(informers.meta(obj).get("namespace") or "")]


class DisruptionController:
    """`await controller.run()` refreshes the PDBs' statuses on the ticks after a write to PDBs, pods or their
    controllers, until cancelled; `sync()` is one pass. A pass computes only the PDBs that changed and those of the
    namespaces where a pod or a controller changed (`informers`), as upstream's queues PDB keys from pod and
    controller events; a PDB nothing it counts changed for would be written the same status."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        interval: float = 1.0,
        reader: reads.Reader | None = None,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._clock = clock
        self._interval = interval
        self._pdbs_seen = informers.Cache(resources.PDBS)
        self._pods_seen = informers.Cache(resources.PODS)
        self._owners_seen = {kind: informers.Cache(res) for kind, res in _SCALED.items()}
        self._in_namespace = informers.Index(_namespace_of)  # namespace -> its pods
        self._queued: set[informers.Key] = set()  # PDBs to compute
        self._namespaces: set[str] = set()  # namespaces whose PDBs to compute

    async def run(self) -> None:
        watch = loop.watch(self._reads, (resources.PDBS, resources.PODS, *_SCALED.values()))
        await loop.every(self._interval, self.sync, clock=self._clock, name="disruption controller", watch=watch)

    async def sync(self) -> PDBReport:
        report = PDBReport()
        (changed_pdbs,) = await informers.refresh(self._reads, (self._pdbs_seen,))
        self._queued.update(delta.key for delta in changed_pdbs if delta.new is not None)
        if not self._pdbs_seen.objects:
            return report
        owner_caches = list(self._owners_seen.values())
        pod_deltas, *owner_deltas = await informers.refresh(self._reads, (self._pods_seen, *owner_caches))
        for delta in pod_deltas:
            self._in_namespace.update(delta)
            self._namespaces.add(delta.key[0])
        self._namespaces.update(delta.key[0] for deltas in owner_deltas for delta in deltas)
        owners: dict[tuple[str, str, str], Mapping[str, Any]] = {
            (kind, *key): obj for kind, cache in self._owners_seen.items() for key, obj in cache.objects.items()
        }
        self._queued.update(key for key in self._pdbs_seen.objects if key[0] in self._namespaces)
        self._namespaces.clear()
        scale, now = scale_from(owners), self._clock.now()
        for key in sorted(self._queued):
            pdb = self._pdbs_seen.objects.get(key)
            if pdb is not None:
                await self._write(pdb, scale, now, report)
            self._queued.discard(key)
        return report

    async def _write(self, pdb: Mapping[str, Any], scale: disruption.Scale, now: float, report: PDBReport) -> None:
        namespace, name = str(informers.meta(pdb).get("namespace") or ""), str(informers.meta(pdb).get("name"))
        pods = [self._pods_seen.objects[key] for key in sorted(self._in_namespace.get(namespace))]
        status = status_for(pdb, pods, scale, now=now)
        if not changed(pdb, status):
            return
        try:
            await self._kube.patch(resources.PDBS, name, {"status": status}, namespace=namespace, subresource="status")
        except client.NotFound:
            return  # deleted since the list
        report.written.append(f"{namespace}/{name}")
