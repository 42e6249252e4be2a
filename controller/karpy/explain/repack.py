"""What the cluster could cost: every pod on karpenter-managed nodes, every pending pod and the CapacityBuffers' room
(their virtual pods, which the controller keeps room for), scheduled from scratch onto new NodeClaims of today's
NodePools under all their constraints (the provisioner's solve, with its repack pass and LP lower bound), against what
today's managed nodes cost. Nodes no NodePool manages stay as they are, with their pods, and take what fits.
Disruption rules (PDBs, do-not-disrupt, budgets) do not apply: this is where the cluster could be, not a plan to get
there in one step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy import settings as karpy_settings
from karpy.cloudprovider import types
from karpy.provisioning import isolation, snapshot
from karpy.scheduling import pods, results, scheduler
from karpy.state import cluster as state_cluster
from karpy.state import statenode

STAY_PUT = frozenset({"DaemonSet", "Node"})
"""Owners whose pods belong to their node (DaemonSet pods come with every node; mirror pods are the node's own)."""


@dataclass(frozen=True, slots=True)
class Repack:
    nodes: int
    """Managed nodes today (NodeClaims, launched or registered)."""
    cost_per_hour: float
    """What the priced ones cost today."""
    unpriced: int
    """Managed nodes whose offering is not in the catalog (left out of `cost_per_hour`)."""
    pods: int
    plan: results.Results


@dataclass(frozen=True, slots=True)
class Prepared:
    today: Sequence[statenode.StateNode]
    input: scheduler.SchedulingInput


def prepare(
    cluster: state_cluster.Cluster,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    *,
    options: karpy_settings.SchedulingSettings,
) -> Prepared:
    state_nodes = list(cluster.state_nodes())
    managed = [n for n in state_nodes if n.nodepool]
    moving = [pods.unbound(p) for n in managed for p in n.pods if p.owner_kind not in STAY_PUT]
    stay = [n for n in state_nodes if not n.nodepool]
    inp = snapshot.provisioning_input(
        cluster,
        stay,
        snapshot.merge_pods(moving, [*cluster.pending_pods(), *cluster.buffer_pods()]),
        instance_types=instance_types,
        options=options,
    )
    return Prepared(managed, dataclasses.replace(inp, compute_lower_bound=True))


def explain(
    prepared: Prepared,
    *,
    price: Callable[[statenode.StateNode], float | None],
    solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve,
) -> Repack:
    prices = [price(n) for n in prepared.today]
    return Repack(
        nodes=len(prepared.today),
        cost_per_hour=sum(p for p in prices if p is not None),
        unpriced=sum(1 for p in prices if p is None),
        pods=len(prepared.input.pods),
        plan=isolation.solve(solver, prepared.input).results,
    )
