"""Scheduling simulations for disruption (pure; core: disruption/helpers.go `SimulateScheduling`).

The candidates' reschedulable pods, every pending pod and the pods of nodes already leaving are scheduled against
all other nodes (candidates and leaving nodes are removed from the cluster view), with the provisioner's preference
and minValues policies, so a decision holds when the provisioner launches for it. Every new NodeClaim the solve
needs counts as a replacement, including ones that only hold pending pods: the candidates' pods may take capacity
(an in-flight claim, room on a node) that pending pods were going to use, so "nothing new is needed" must hold for
all of them before a node is deleted -- as upstream, which blocks consolidation while pods wait for new capacity.
A candidate pod that cannot be placed anywhere makes the disruption impossible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import nodepool
from karpy.cloudprovider import types
from karpy.disruption import candidates as candidates_mod
from karpy.provisioning import snapshot as provisioning_snapshot
from karpy.scheduling import pods, results, scheduler, volumes
from karpy.state import statenode

Solver = Callable[[scheduler.SchedulingInput], results.Results]
DEFAULT_OPTIONS = provisioning_snapshot.SchedulingOptions()
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


@dataclass(frozen=True, slots=True)
class Simulation:
    replacements: tuple[results.PlannedNodeClaim, ...]
    unschedulable: Mapping[str, str]  # candidate pod key -> why it fits nowhere

    @property
    def all_scheduled(self) -> bool:
        return not self.unschedulable


def simulate(
    snap: Snapshot,
    chosen: Sequence[candidates_mod.Candidate],
    *,
    solver: Solver = scheduler.solve,
    options: provisioning_snapshot.SchedulingOptions = DEFAULT_OPTIONS,
) -> Simulation:
    leaving = {c.node.name for c in chosen}
    others = [n for n in snap.nodes if n.name not in leaving]
    moving = [p for c in chosen for p in c.reschedulable_pods]
    moving_keys = {p.key for p in moving}
    pool_list, _ = provisioning_snapshot.schedulable_pools(snap.pools)
    inp = provisioning_snapshot.scheduling_input(
        provisioning_snapshot.merge_pods(moving, snap.pending, provisioning_snapshot.reschedulable_pods(others)),
        pool_list,
        instance_types=snap.instance_types,
        existing=provisioning_snapshot.existing_nodes(others),
        daemonsets=snap.daemonsets,
        volume_catalog=snap.volumes,
        options=options,
    )
    out = solver(inp)
    return Simulation(
        replacements=tuple(out.new_nodeclaims),
        unschedulable={k: why for k, why in out.unschedulable.items() if k in moving_keys},
    )
