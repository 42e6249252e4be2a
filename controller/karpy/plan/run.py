"""One plan: the proposal laid over the cluster model, each launched NodeClaim's drift verdict, each NodePool's
waves under its Drifted budgets, the holds (PDBs, do-not-disrupt) on the nodes that go, what the proposed pools can
no longer launch, and the cluster's capacity and cost before and after. Reads the model, decides; writes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import settings as karpy_settings
from karpy.api import ec2nodeclass, labels, nodeoverlay, nodepool, parse
from karpy.cloudprovider import types
from karpy.disruption import blockers, budgets, candidates
from karpy.explain import repack
from karpy.kube import resources
from karpy.plan import capacity, drift, proposal, waves
from karpy.state import cluster as state_cluster
from karpy.state import facts, statenode


class Change(enum.StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    DELETED = "deleted"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Options:
    replacement: float = waves.REPLACEMENT
    """Seconds one drift replacement takes (launch, Ready, drain), for the waves' timing."""
    eviction: float = waves.EVICTION
    """Seconds one round of PDB-limited evictions takes (`waves`), for a wave whose PDBs let its pods go slower."""
    scheduling: karpy_settings.SchedulingSettings = field(default_factory=karpy_settings.SchedulingSettings)


@dataclass(frozen=True, slots=True)
class NodePlan:
    name: str
    nodeclaim: str
    nodepool: str
    verdict: drift.Verdict
    pods: int
    """Pods that would move (DaemonSet and mirror pods stay with the node)."""
    holds: tuple[blockers.Blocker, ...] = ()
    """What holds the node back once it is chosen: PDBs that allow no eviction, do-not-disrupt pods or node."""


@dataclass(frozen=True, slots=True)
class PoolPlan:
    name: str
    change: Change
    nodes: int
    drifts: int
    may_drift: int
    deleted: int
    budgets: tuple[str, ...]
    schedule: waves.Schedule
    unlaunchable: str = ""


@dataclass(frozen=True, slots=True)
class Plan:
    now: float
    nodes: tuple[NodePlan, ...]
    pools: tuple[PoolPlan, ...]
    before: capacity.Capacity
    after: capacity.After
    warnings: tuple[str, ...] = ()

    @property
    def disruptive(self) -> bool:
        """Whether a CI gate should stop: a node drifts, may drift or is deleted, a pod would be left unschedulable,
        or a NodePool can no longer launch."""
        return (
            any(n.verdict.outcome != drift.Outcome.NONE for n in self.nodes)
            or bool(self.after.unschedulable)
            or any(p.unlaunchable for p in self.pools)
        )


@dataclass(frozen=True, slots=True)
class Proposed:
    """The NodePools, EC2NodeClasses and NodeOverlays once the proposal is applied, parsed."""

    pools: Mapping[str, nodepool.NodePool]
    classes: Mapping[str, ec2nodeclass.EC2NodeClass]
    overlays: Sequence[nodeoverlay.NodeOverlay]
    changes: Mapping[str, Change]


def propose(cluster: state_cluster.Cluster, given: proposal.Proposal) -> Proposed:
    """The cluster's parsed objects with the proposal's in place (parsed by the controller's parsers)."""
    merged = proposal.overlay({r: cluster.objects(r) for r in proposal.KINDS.values()}, given)
    proposal.check_references(given, merged)
    pools = {p.name: p for p in cluster.nodepools()}
    classes = dict(cluster.nodeclasses())
    overlays = {o.name: o for o in cluster.nodeoverlays()}
    changes = dict.fromkeys(pools, Change.UNCHANGED)
    by_name = {(r, facts.key(o)): o for r, found in merged.items() for o in found}
    for p in given.objects:
        body = by_name.get((p.resource, p.name))
        if p.resource == resources.NODEPOOLS:
            if body is None:
                pools.pop(p.name, None)
                changes[p.name] = Change.DELETED
            else:
                changes[p.name] = Change.CHANGED if p.name in pools else Change.ADDED
                pools[p.name] = parse.nodepool(body)
        elif p.resource == resources.EC2NODECLASSES:
            if body is None:
                classes.pop(p.name, None)
            else:
                classes[p.name] = parse.ec2nodeclass(body)
        elif body is None:
            overlays.pop(p.name, None)
        else:
            overlays[p.name] = parse.nodeoverlay(body)
    return Proposed(pools, classes, tuple(overlays.values()), changes)


def changed_selectors(cluster: state_cluster.Cluster, proposed: Proposed) -> list[ec2nodeclass.EC2NodeClass]:
    """The proposed EC2NodeClasses whose AMI, subnet or security-group selector terms differ from the cluster's:
    the ones whose drift depends on what EC2 resolves them to."""
    current = cluster.nodeclasses()
    out = []
    for name, nc in sorted(proposed.classes.items()):
        was = current.get(name)
        if was is not None and any(
            getattr(nc.spec, f) != getattr(was.spec, f)
            for f in ("ami_selector_terms", "subnet_selector_terms", "security_group_selector_terms")
        ):
            out.append(nc)
    return out


def _holds(
    node: statenode.StateNode, raw: Mapping[str, Mapping[str, Any]], pdbs: Sequence[candidates.PDB], now: float
) -> tuple[tuple[blockers.Blocker, ...], dict[str, int]]:
    """What holds the node back, and its evictable pods per PDB that selects them (for the waves' timing)."""
    out = []
    under: dict[str, int] = {}
    if (
        node.node is not None
        and (facts.metadata(node.node).get("annotations") or {}).get(labels.ANNOTATION_DO_NOT_DISRUPT) == "true"
    ):
        out.append(blockers.node_do_not_disrupt())
    for pod in node.pods:
        obj = raw.get(pod.key)
        if obj is None:
            continue
        info = candidates.pod_info(obj, now=now)
        if info.do_not_disrupt:
            out.append(blockers.pod_do_not_disrupt(info.key))
        elif info.reschedulable:
            if len(selecting := candidates.matching(info, pdbs)) == 1:
                under[selecting[0].key] = under.get(selecting[0].key, 0) + 1
            if why := candidates.eviction_blocker(info, pdbs):
                out.append(why)
    return tuple(out), under


def _unlaunchable(
    pool: nodepool.NodePool | None,
    proposed: Proposed,
    instance_types: Sequence[types.InstanceType],
    usage: Mapping[str, int],
) -> str:
    if pool is None:
        return ""
    ref = pool.template.node_class_ref
    if ref.kind == "EC2NodeClass" and ref.name not in proposed.classes:
        return f"its EC2NodeClass {ref.name} does not exist"
    return capacity.unlaunchable(pool, instance_types, usage)


def plan(
    cluster: state_cluster.Cluster,
    proposed: Proposed,
    *,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    price: Callable[[statenode.StateNode], float | None],
    now: float,
    options: Options = Options(),
    warnings: Sequence[str] = (),
    resolved: Mapping[str, types.SelectorResolution] | None = None,
) -> Plan:
    """`instance_types` and `price` are the proposed pools' (`price` falls back to any pool's for a node whose
    pool is gone, as explain's does); `resolved`: the proposed EC2NodeClasses' selectors as EC2 resolves them, by
    name (None: no AWS access; `changed_selectors` names the classes worth resolving)."""
    current_pools = {p.name: p for p in cluster.nodepools()}
    current_classes = cluster.nodeclasses()
    state_nodes = cluster.state_nodes()
    raw = {facts.key(o): o for o in cluster.objects(resources.PODS)}
    pdbs = [p for o in cluster.pdbs() if (p := candidates.pdb_from_manifest(o)) is not None]
    nodes: list[NodePlan] = []
    under_pdbs: dict[str, dict[str, int]] = {}
    leaving: list[statenode.StateNode] = []
    kept: list[statenode.StateNode] = []
    for node in state_nodes:
        claim = node.nodeclaim
        if not node.managed or claim is None or not node.nodepool:
            kept.append(node)
            continue
        ref = claim.spec.node_class_ref.name
        found = drift.verdict(
            claim,
            node.labels,
            pools=(current_pools.get(node.nodepool), proposed.pools.get(node.nodepool)),
            classes=(current_classes.get(ref), proposed.classes.get(ref)),
            resolved=resolved.get(ref) if resolved is not None else None,
        )
        going = found.outcome in (drift.Outcome.DRIFTS, drift.Outcome.DELETED)
        (leaving if going else kept).append(node)
        moving = sum(1 for p in node.pods if p.owner_kind not in repack.STAY_PUT)
        holds: tuple[blockers.Blocker, ...] = ()
        if found.outcome != drift.Outcome.NONE:
            holds, under_pdbs[node.name] = _holds(node, raw, pdbs, now)
        nodes.append(NodePlan(node.name, claim.name, node.nodepool, found, moving, holds))
    total, disrupting = budgets.counts(state_nodes)
    allowed = {p.key: p.disruptions_allowed for p in pdbs}
    pools = []
    for name in sorted({*current_pools, *proposed.pools}):
        mine = [n for n in nodes if n.nodepool == name]
        count = {o: sum(1 for n in mine if n.verdict.outcome == o) for o in drift.Outcome}
        pool = proposed.pools.get(name)
        found_schedule = (
            waves.schedule(
                pool,
                count[drift.Outcome.DRIFTS],
                total=total.get(name, 0),
                disrupting=disrupting.get(name, 0),
                now=now,
                replacement=options.replacement,
                # Assumed to go in the plan's node order; the controller's own order may group them otherwise.
                pdb_pods=[under_pdbs[n.name] for n in mine if n.verdict.outcome == drift.Outcome.DRIFTS],
                allowed=allowed,
                eviction=options.eviction,
            )
            if pool is not None
            else waves.Schedule((), None)
        )
        pools.append(
            PoolPlan(
                name=name,
                change=proposed.changes.get(name, Change.UNCHANGED),
                nodes=len(mine),
                drifts=count[drift.Outcome.DRIFTS],
                may_drift=count[drift.Outcome.MAY_DRIFT],
                deleted=count[drift.Outcome.DELETED],
                budgets=tuple(waves.describe(pool)) if pool is not None else (),
                schedule=found_schedule,
                unlaunchable=_unlaunchable(pool, proposed, instance_types.get(name, ()), cluster.nodepool_usage(name)),
            )
        )
    before = capacity.measure([n for n in state_nodes if n.nodepool], price)
    after = capacity.after(
        cluster,
        kept=kept,
        leaving=leaving,
        pools=list(proposed.pools.values()),
        instance_types=instance_types,
        price=price,
        options=options.scheduling,
    )
    return Plan(now, tuple(nodes), tuple(pools), before, after, tuple(warnings))
