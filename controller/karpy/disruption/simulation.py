"""Scheduling simulations for disruption (pure; core: disruption/helpers.go `SimulateScheduling`).

The candidates' reschedulable pods, every pending pod and the pods of nodes already leaving are scheduled against
all other nodes (candidates and leaving nodes are removed from the cluster view), with the provisioner's preference
and minValues policies, so a decision holds when the provisioner launches for it. Every new NodeClaim the solve
needs counts as a replacement, including ones that only hold pending pods: the candidates' pods may take capacity
(an in-flight claim, room on a node) that pending pods were going to use, so "nothing new is needed" must hold for
all of them before a node is deleted -- as upstream, which blocks consolidation while pods wait for new capacity.
A candidate pod that cannot be placed anywhere makes the disruption impossible, and so does one placed on a node
not yet initialized (upstream's `UninitializedNodeError`): an in-flight claim may never come up.

A consolidation simulation (not drift's) also keeps the candidates' pods off nodes still inside their NodePool's
consolidateAfter window (`Snapshot.settling`): pods just moved there, or a node just launched, would otherwise be
packed again at once, and the window exists to let a node settle (upstream v1.14 IsConsolidationSimulation). Pending
pods and the pods of leaving nodes may still go there: they need a home either way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpy import settings as karpy_settings
from karpy.api import nodepool
from karpy.cloudprovider import types
from karpy.disruption import candidates as disruption_candidates
from karpy.nodeclaim import disruption_conditions
from karpy.provisioning import snapshot as provisioning_snapshot
from karpy.scheduling import catalog, pods, results, scheduler, volumes
from karpy.state import statenode

log = logging.getLogger(__name__)

Solver = Callable[[scheduler.SchedulingInput], results.Results]
DEFAULT_OPTIONS = provisioning_snapshot.DEFAULT_OPTIONS
"""The provisioner's default preference and minValues policies (Respect, Strict)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster as one disruption pass sees it."""

    pools: Sequence[nodepool.NodePool]
    instance_types: Mapping[str, Sequence[types.InstanceType]]
    nodes: Sequence[statenode.StateNode]
    pending: Sequence[pods.Pod] = ()
    daemonsets: Sequence[pods.Pod] = ()
    volumes: volumes.VolumeCatalog = field(default_factory=volumes.VolumeCatalog)
    settling: frozenset[str] = frozenset()
    """Names of the nodes still inside their NodePool's consolidateAfter window (`settling_nodes`)."""
    existing: tuple[scheduler.ExistingNode, ...] = ()
    """`nodes` as every simulation's solve sees them (those not leaving), derived once (`scheduler.derive`):
    filled in at construction."""
    catalogs: catalog.Catalogs = field(default_factory=catalog.Catalogs, compare=False)
    """The pools' catalogs, made by the first simulation and reused by the others."""

    def __post_init__(self) -> None:
        if not self.existing:
            derived = tuple(scheduler.derive(n) for n in provisioning_snapshot.existing_nodes(self.nodes))
            object.__setattr__(self, "existing", derived)


@dataclass(frozen=True, slots=True)
class Simulation:
    replacements: tuple[results.PlannedNodeClaim, ...]
    unschedulable: Mapping[str, str]  # candidate pod key -> why it fits nowhere
    placements: Mapping[str, str] = field(default_factory=dict)
    """Candidate pod key -> where it would go: "node/<name>", or "claim/<i>" for `replacements[i]`."""

    @property
    def all_scheduled(self) -> bool:
        return not self.unschedulable


class Simulate(Protocol):
    """`simulate` bound to one snapshot: what removing `chosen` would take."""

    def __call__(
        self, chosen: Sequence[disruption_candidates.Candidate], /, *, consolidation: bool = True
    ) -> Simulation: ...


def settling_nodes(
    nodes: Sequence[statenode.StateNode], pools: Sequence[nodepool.NodePool], *, now: float
) -> frozenset[str]:
    """Nodes whose pods changed (or that initialized) less than their pool's consolidateAfter ago. Never and 0
    leave no window; an uninitialized claim has no time to count from, so it is not settling (upstream
    IsUnderConsolidateAfter)."""
    by_name = {p.name: p for p in pools}
    out = set()
    for n in nodes:
        pool = by_name.get(n.nodepool)
        if pool is None or n.nodeclaim is None:
            continue
        if disruption_conditions.consolidatable(n.nodeclaim, pool, now=now).wait is not None:
            out.add(n.name)
    return frozenset(out)


def simulate(
    snap: Snapshot,
    chosen: Sequence[disruption_candidates.Candidate],
    *,
    consolidation: bool = True,
    solver: Solver = scheduler.solve,
    options: karpy_settings.SchedulingSettings = DEFAULT_OPTIONS,
) -> Simulation:
    leaving = {c.node.name for c in chosen}
    others = [n for n in snap.nodes if n.name not in leaving]
    moving = [p for c in chosen for p in c.reschedulable_pods]
    moving_keys = {p.key for p in moving}
    existing = [n for n in snap.existing if n.name not in leaving]
    if consolidation:
        moving = [dataclasses.replace(p, from_candidate=True) for p in moving]
        existing = [
            dataclasses.replace(n, under_consolidate_after=True) if n.name in snap.settling else n for n in existing
        ]
    pool_list, _ = provisioning_snapshot.schedulable_pools(snap.pools)
    inp = provisioning_snapshot.scheduling_input(
        provisioning_snapshot.merge_pods(moving, snap.pending, provisioning_snapshot.reschedulable_pods(others)),
        pool_list,
        instance_types=snap.instance_types,
        existing=existing,
        daemonsets=snap.daemonsets,
        volume_catalog=snap.volumes,
        options=options,
        catalogs=snap.catalogs,
        decisive=frozenset(moving_keys),
        one_claim_at_most=consolidation,  # consolidation.compute acts on no more; drift launches every claim
    )
    out = solver(inp)
    placements = {k: where for k, where in out.placements().items() if k in moving_keys}
    unschedulable = {k: why for k, why in out.unschedulable.items() if k in moving_keys}
    unschedulable.update(_on_uninitialized(placements, snap.nodes))
    return Simulation(replacements=tuple(out.new_nodeclaims), unschedulable=unschedulable, placements=placements)


def _on_uninitialized(placements: Mapping[str, str], nodes: Sequence[statenode.StateNode]) -> dict[str, str]:
    """The moving pods placed on a node not yet initialized, and why that fails them: a decision must not rest on
    capacity that may never come up (core: disruption/helpers.go SimulateScheduling, `UninitializedNodeError`).
    Only the candidates' pods: a pending pod, or one of a node already leaving, goes there either way."""
    waiting = {f"node/{n.name}": n for n in nodes if not n.initialized}
    return {key: uninitialized_message(waiting[where]) for key, where in placements.items() if where in waiting}


def uninitialized_message(node: statenode.StateNode) -> str:
    """Upstream's `UninitializedNodeError` text: "would schedule against uninitialized nodeclaim/<name>, node/<name>"
    (each part only when the object exists)."""
    parts = [f"nodeclaim/{node.nodeclaim_name}"] if node.nodeclaim is not None else []
    parts += [f"node/{node.node_name}"] if node.node is not None else []
    return "would schedule against uninitialized " + ", ".join(parts)


FAILED_SIMULATION = "<simulation>"
"""The key under which a simulation that raised reports its failure: never "all scheduled"."""


def guarded(simulate_: Simulate) -> Simulate:
    """`simulate_` that never raises: a simulation that fails disrupts nothing (never "all scheduled")."""

    def run(chosen: Sequence[disruption_candidates.Candidate], /, *, consolidation: bool = True) -> Simulation:
        try:
            return simulate_(chosen, consolidation=consolidation)
        except Exception as exc:
            log.exception(
                "disruption simulation raised; the candidates stay", extra={"nodeclaims": [c.name for c in chosen]}
            )
            return Simulation(replacements=(), unschedulable={FAILED_SIMULATION: f"{type(exc).__name__}: {exc}"})

    return run
