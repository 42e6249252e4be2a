"""What the proposal leaves the cluster able to launch, and what it costs afterwards (pure over the model).

Capacity before: the managed nodes as they are. After: the nodes that stay, plus what the provisioner's own solve
(`provisioning.snapshot`, `scheduling.scheduler`) launches on the proposed NodePools for the pods the replaced or
deleted nodes shed; pods it cannot place become unschedulable. A proposed NodePool can launch nothing when no
instance type of its node class meets its requirements, or when its limits are already exceeded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy import requirements
from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.explain import repack
from karpy.provisioning import isolation, snapshot
from karpy.scheduling import pods, results, scheduler
from karpy.settings import SchedulingSettings
from karpy.state import cluster as state_cluster
from karpy.state import statenode

CPU, MEMORY = "cpu", "memory"


@dataclass(frozen=True, slots=True)
class Capacity:
    nodes: int
    cpu: int
    """Millicores allocatable."""
    memory: int
    """Allocatable memory in milli-bytes (the model's unit for every resource)."""
    cost_per_hour: float


@dataclass(frozen=True, slots=True)
class After:
    capacity: Capacity
    nodeclaims: tuple[results.PlannedNodeClaim, ...]
    unschedulable: Mapping[str, str]
    """Pod key -> why the solve cannot place it on the proposed pools."""


def unlaunchable(
    pool: nodepool.NodePool, instance_types: Sequence[types.InstanceType], usage: Mapping[str, int]
) -> str:
    """Why `pool` can launch no NodeClaim ("" when it can)."""
    reqs = requirements.Requirements.from_node_selector(pool.template.requirements)
    custom = frozenset(k for k in reqs if k not in labels.WELL_KNOWN_LABELS)
    if not any(_meets(t, reqs, custom) for t in instance_types):
        return f"no instance type of its EC2NodeClass meets the requirements ({len(instance_types)} looked at)"
    over = sorted(k for k, limit in pool.limits.items() if usage.get(k, 0) >= limit)
    if over:
        return f"limits already reached: {', '.join(over)}"
    return ""


def _meets(it: types.InstanceType, reqs: requirements.Requirements, custom: frozenset[str]) -> bool:
    for offering in it.offerings:
        if not offering.available:
            continue
        found = requirements.Requirements.from_labels(
            {**it.labels, labels.LABEL_ZONE: offering.zone, labels.LABEL_CAPACITY_TYPE: offering.capacity_type}
        )
        if found.compatible(reqs, allow_undefined=custom) is None:
            return True
    return False


def measure(nodes: Sequence[statenode.StateNode], price: Callable[[statenode.StateNode], float | None]) -> Capacity:
    return Capacity(
        nodes=len(nodes),
        cpu=sum(n.allocatable.get(CPU, 0) for n in nodes),
        memory=sum(n.allocatable.get(MEMORY, 0) for n in nodes),
        cost_per_hour=sum(p for n in nodes if (p := price(n)) is not None),
    )


def after(
    cluster: state_cluster.Cluster,
    *,
    kept: Sequence[statenode.StateNode],
    leaving: Sequence[statenode.StateNode],
    pools: Sequence[nodepool.NodePool],
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    price: Callable[[statenode.StateNode], float | None],
    options: SchedulingSettings,
) -> After:
    """The cluster once `leaving` are replaced: their pods solved onto `kept` and new NodeClaims of `pools`."""
    managed = [n for n in kept if n.nodepool]
    staying = measure(managed, price)
    moving = [pods.unbound(p) for n in leaving for p in n.pods if p.owner_kind not in repack.STAY_PUT]
    if not moving:
        return After(staying, (), {})
    inp = snapshot.provisioning_input(
        cluster, kept, moving, instance_types=instance_types, options=options, pools=pools
    )
    solved = isolation.solve(scheduler.solve, inp).results
    claims = tuple(solved.new_nodeclaims)
    shapes = [c.instance_type_options[0].allocatable for c in claims if c.instance_type_options]
    return After(
        Capacity(
            nodes=staying.nodes + len(claims),
            cpu=staying.cpu + sum(s.get(CPU, 0) for s in shapes),
            memory=staying.memory + sum(s.get(MEMORY, 0) for s in shapes),
            cost_per_hour=staying.cost_per_hour + sum(c.cheapest.price for c in claims if c.cheapest is not None),
        ),
        claims,
        dict(solved.unschedulable),
    )
