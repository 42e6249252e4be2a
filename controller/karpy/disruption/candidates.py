"""Which nodes may be disrupted, and what disrupting them costs (pure; core: disruption/types.go `NewCandidate`,
state/statenode.go `ValidateNodeDisruptable`/`ValidatePodsDisruptable`, utils/disruption `EvictionCost`).

A candidate is managed (NodeClaim + Node + nodepool label), Initialized, not marked for deletion or deleting, not
nominated, not already queued, has no pod karpy cannot read, its Node is not annotated do-not-disrupt, and its
instance type is known. Its pods
block it when one has an active do-not-disrupt annotation or a PodDisruptionBudget currently forbids evicting it
(or it matches more than one PDB) — except for the *eventual* class (drift) when the NodeClaim has a
terminationGracePeriod, which bounds how long such pods can hold the node.

Costs (v1.14): EvictionCost(pod) = clamp(1 + deletion-cost/2^27 + priority/2^25, −10, 10); DisruptionCost =
Σ EvictionCost × lifetime remaining; RescheduleDisruptionCost = 1 + Σ max(0, EvictionCost of reschedulable pods);
SavingsRatio = price / RescheduleDisruptionCost (sorted descending); IsEmpty ⇔ RescheduleDisruptionCost ≤ 1.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import requirements
from karpy.api import donotdisrupt, labels, meta, nodeclaim, nodepool
from karpy.cloudprovider import types
from karpy.disruption import blockers
from karpy.scheduling import pods
from karpy.state import facts, movable, statenode

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


class DisruptionClass(enum.StrEnum):
    GRACEFUL = "graceful"  # consolidation and emptiness: every blocker blocks
    EVENTUAL = "eventual"  # drift: pod blockers are ignored when the claim has a terminationGracePeriod


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What disruption reads from a pod manifest beyond the scheduling view."""

    key: str
    namespace: str
    labels: Mapping[str, str]
    do_not_disrupt: bool
    priority: int
    deletion_cost: float
    reschedulable: bool  # not DaemonSet/mirror-owned, not terminal, not terminating


def pod_info(obj: Mapping[str, Any], *, now: float) -> PodInfo:
    """The pod at `now`: a do-not-disrupt duration counts only while it runs (`donotdisrupt.active`)."""
    md, spec, status = facts.metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    annotations = md.get("annotations") or {}
    owners = [o for o in md.get("ownerReferences") or () if isinstance(o, Mapping) and o.get("controller")]
    daemon_or_node = any(o.get("kind") in ("DaemonSet", "Node") for o in owners) or (
        facts.MIRROR_ANNOTATION in annotations
    )
    terminal = status.get("phase") in facts.TERMINAL_PHASES
    terminating = bool(md.get("deletionTimestamp"))
    try:
        deletion_cost = float(annotations.get(POD_DELETION_COST, 0) or 0)
    except ValueError:
        deletion_cost = 0.0
    priority = spec.get("priority")
    return PodInfo(
        key=facts.key(obj),
        namespace=str(md.get("namespace") or ""),
        labels=dict(md.get("labels") or {}),
        do_not_disrupt=donotdisrupt.pod_active(obj, now=now) and not terminal and not terminating,
        priority=priority if isinstance(priority, int) else 0,
        deletion_cost=deletion_cost,
        reschedulable=not daemon_or_node and not terminal and not terminating,
    )


def eviction_cost(pod: PodInfo) -> float:
    cost = 1.0 + pod.deletion_cost / 2**27 + pod.priority / 2**25
    return min(10.0, max(-10.0, cost))


def lifetime_remaining(claim: nodeclaim.NodeClaim, now: float) -> float:
    """Fraction of expireAfter left (1 when the claim never expires)."""
    expire_after, created = claim.spec.expire_after, claim.metadata.creation_timestamp
    if expire_after is None or expire_after <= 0 or created is None:
        return 1.0
    return min(1.0, max(0.0, (expire_after - (now - created)) / expire_after))


def disruption_cost(pod_infos: Iterable[PodInfo], lifetime: float) -> float:
    return sum(eviction_cost(p) for p in pod_infos) * lifetime


def reschedule_disruption_cost(pod_infos: Iterable[PodInfo]) -> float:
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pod_infos if p.reschedulable)


# --- PodDisruptionBudgets -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PDB:
    key: str
    namespace: str
    selector: requirements.Requirements
    disruptions_allowed: int
    fully_blocking: bool = False
    """Never allows an eviction, whatever its pods' health (`karpy.state.movable.fully_blocking`)."""


def pdb_from_manifest(obj: Mapping[str, Any]) -> PDB | None:
    """None when the selector is unusable (a nil selector selects nothing in policy/v1)."""
    selector = movable.selector(obj)
    if selector is None:
        return None
    allowed = (obj.get("status") or {}).get("disruptionsAllowed", 0)
    return PDB(
        key=facts.key(obj),
        namespace=str(facts.metadata(obj).get("namespace") or ""),
        selector=selector,
        disruptions_allowed=allowed if isinstance(allowed, int) else 0,
        fully_blocking=movable.fully_blocking(obj.get("spec") or {}),
    )


def matching(pod: PodInfo, pdbs: Sequence[PDB]) -> list[PDB]:
    """The PDBs that select `pod`."""
    return [p for p in pdbs if p.namespace == pod.namespace and p.selector.admits(pod.labels)]


def eviction_blocker(pod: PodInfo, pdbs: Sequence[PDB]) -> blockers.Blocker | None:
    """Why a PDB would refuse evicting `pod` now (None when eviction is allowed)."""
    found = matching(pod, pdbs)
    if len(found) > 1:
        return blockers.several_pdbs(pod.key, [p.key for p in found])
    if found and found[0].disruptions_allowed <= 0:
        return blockers.pdb_blocks(found[0].key, pod.key)
    return None


def held(pod: PodInfo, pdbs: Sequence[PDB]) -> bool:
    """A pod drift may pass (terminationGracePeriod) that still cannot be evicted for now: do-not-disrupt, or PDBs
    that never allow it. It gets no replacement: it stays until it goes or the grace period ends (core:
    pkg/utils/pdb/pdb.go IsCurrentlyReschedulable in disruption/helpers.go SimulateScheduling, #2033)."""
    found = matching(pod, pdbs)
    return pod.do_not_disrupt or len(found) > 1 or (bool(found) and found[0].fully_blocking)


# --- candidates -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    node: statenode.StateNode
    claim: nodeclaim.NodeClaim
    pool: nodepool.NodePool
    instance_type: types.InstanceType
    capacity_type: str
    zone: str
    price: float
    pod_infos: tuple[PodInfo, ...]
    reschedulable_pods: tuple[pods.Pod, ...]  # scheduling views of the pods that must move, unbound
    disruption_cost: float
    reschedule_cost: float

    @property
    def name(self) -> str:
        """The NodeClaim's name (what disruption deletes)."""
        return self.claim.metadata.name

    @property
    def node_name(self) -> str:
        return self.node.node_name

    @property
    def is_empty(self) -> bool:
        return self.reschedule_cost <= 1.0

    @property
    def savings_ratio(self) -> float:
        return self.price / self.reschedule_cost


@dataclass(frozen=True, slots=True)
class Rejection:
    """A node that is no candidate, and why (the message of its DisruptionBlocked event)."""

    node: statenode.StateNode
    blocker: blockers.Blocker

    @property
    def reason(self) -> str:
        return self.blocker.message


def node_blocker(node: statenode.StateNode, *, now: float, queued: frozenset[str]) -> blockers.Blocker | None:
    """Node-level rules; None when the node may be considered."""
    if not node.managed or node.nodeclaim is None:
        return blockers.not_managed()
    if node.node is None:
        return blockers.not_registered()
    if not node.initialized:
        return blockers.not_initialized()
    if node.marked_for_deletion or node.deleting:
        return blockers.deleting()
    if node.nominated(now):
        return blockers.nominated()
    if node.nodeclaim_name in queued:
        return blockers.in_progress()
    if node.unreadable_pods:
        # Never disrupt on a partial view: a pod karpy cannot read cannot be simulated, moved or counted.
        return blockers.unreadable_pod(node.unreadable_pods[0])
    node_annotations = facts.metadata(node.node).get("annotations") or {}
    if node_annotations.get(labels.ANNOTATION_DO_NOT_DISRUPT) == "true":
        return blockers.node_do_not_disrupt()
    return None


def pods_blocker(pod_infos: Sequence[PodInfo], pdbs: Sequence[PDB]) -> blockers.Blocker | None:
    for pod in pod_infos:
        if pod.do_not_disrupt:
            return blockers.pod_do_not_disrupt(pod.key)
    for pod in pod_infos:
        if pod.reschedulable and (why := eviction_blocker(pod, pdbs)):
            return why
    return None


def find_offering(instance_type: types.InstanceType, node_labels: Mapping[str, str]) -> types.Offering | None:
    zone, capacity_type = node_labels.get(labels.LABEL_ZONE), node_labels.get(labels.LABEL_CAPACITY_TYPE)
    matching = [o for o in instance_type.offerings if o.zone == zone and o.capacity_type == capacity_type]
    return min(matching, key=lambda o: o.price) if matching else None


def new_candidate(
    node: statenode.StateNode,
    *,
    pools: Mapping[str, nodepool.NodePool],
    instance_types: Mapping[str, Mapping[str, types.InstanceType]],
    pod_infos: Mapping[str, PodInfo],
    pdbs: Sequence[PDB],
    disruption_class: DisruptionClass,
    now: float,
    queued: frozenset[str] = frozenset(),
) -> Candidate | Rejection:
    """A candidate, or why `node` is not one. `instance_types` maps pool name to its types by name, `pod_infos`
    "ns/name" to what `pod_info` read from the pod's manifest."""
    if why := node_blocker(node, now=now, queued=queued):
        return Rejection(node, why)
    assert node.nodeclaim is not None
    pool = pools.get(node.nodepool)
    if pool is None:
        return Rejection(node, blockers.nodepool_not_found(node.nodepool))
    type_name = node.labels.get(labels.LABEL_INSTANCE_TYPE, "")
    instance_type = instance_types.get(pool.name, {}).get(type_name)
    if instance_type is None:
        return Rejection(node, blockers.instance_type_not_found(type_name))
    offering = find_offering(instance_type, node.labels)
    if offering is None:
        return Rejection(node, blockers.offering_not_found(type_name))
    infos = tuple(pod_infos.get(p.key) or _bare_info(p) for p in node.pods)
    tolerate_pods = disruption_class is DisruptionClass.EVENTUAL and (
        node.nodeclaim.spec.termination_grace_period is not None
    )
    if not tolerate_pods and (why := pods_blocker(infos, pdbs)):
        return Rejection(node, why)
    moving = {i.key for i in infos if i.reschedulable and not (tolerate_pods and held(i, pdbs))}
    return Candidate(
        node=node,
        claim=node.nodeclaim,
        pool=pool,
        instance_type=instance_type,
        capacity_type=offering.capacity_type,
        zone=offering.zone,
        price=offering.price,
        pod_infos=infos,
        reschedulable_pods=tuple(pods.unbound(p) for p in node.pods if p.key in moving),
        disruption_cost=disruption_cost(infos, lifetime_remaining(node.nodeclaim, now)),
        reschedule_cost=reschedule_disruption_cost(infos),
    )


def by_savings(candidates: Iterable[Candidate]) -> list[Candidate]:
    """v1.14 order: highest SavingsRatio first; ties by disruption cost, then name, for a stable order."""
    return sorted(candidates, key=lambda c: (-c.savings_ratio, c.disruption_cost, c.name))


def condition_since(claim: nodeclaim.NodeClaim, type_: str) -> float:
    found: meta.Condition | None = claim.condition(type_)
    return found.last_transition_time or 0.0 if found is not None else 0.0


def _bare_info(pod: pods.Pod) -> PodInfo:
    return PodInfo(pod.key, pod.namespace, pod.labels, False, 0, 0.0, not pod.is_daemon)
