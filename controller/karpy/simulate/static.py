"""Static NodePools (`spec.replicas`) in a simulation: the NodeClaims the controller's static-pool reconciler would
create (`karpy.static`: counts of the pool's claims in the manifests, `to_create` within `limits.nodes`),
each built as the provisioner builds it and launched as the cloud provider launches a claim with its pool's
requirements only (the cheapest available offering that satisfies them, core: IsStaticNodeClaim). The scheduler
then sees them as claims in flight: pending pods may be nominated to them, as they are to any launched claim."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as karpy_clock
from karpy.api import manifest, nodepool, parse, quantity
from karpy.cloudprovider import tenancy, types
from karpy.cloudprovider.fake import provider
from karpy.kube import client, resources
from karpy.provisioning import nodeclaim_builder, snapshot
from karpy.scheduling import catalog as scheduling_catalog
from karpy.scheduling import results, scheduler
from karpy.state import cluster as state_cluster
from karpy.state import nodepoolstate, statenode
from karpy.static import provisioning as static_provisioning

REASON = "static NodePool (spec.replicas): the controller keeps this many NodeClaims whatever the pods"


@dataclass(frozen=True, slots=True)
class Launch:
    name: str
    plan: results.PlannedNodeClaim
    """The pool's static plan, with the instance type and offering the launch picks."""
    manifest: Mapping[str, Any]
    """The NodeClaim as the cluster holds it once launched: labels and allocatable of its instance type."""


def launches(
    pools: Iterable[nodepool.NodePool],
    nodes: Sequence[statenode.StateNode],
    catalog: Mapping[str, Sequence[types.InstanceType]],
) -> list[Launch]:
    """The NodeClaims static pools would get now beside the cluster's `nodes`, named `<pool>-<n>`; a pool none of
    whose offerings fits gets none (the launch fails with InsufficientCapacity)."""
    out: list[Launch] = []
    for pool in sorted(pools, key=lambda p: p.name):
        if pool.replicas is None or pool.metadata.deletion_timestamp is not None or not static_provisioning.ready(pool):
            continue
        found = nodepoolstate.counts(nodepoolstate.pool_nodes(nodes, pool.name))
        for i in range(static_provisioning.to_create(pool, found)):
            plan = scheduling_catalog.static_plan(pool)
            launch = _launch(f"{pool.name}-{i + 1}", plan, pool, catalog.get(pool.name, ()))
            if launch is not None:
                out.append(launch)
    return out


def _launch(
    name: str, plan: results.PlannedNodeClaim, pool: nodepool.NodePool, listed: Sequence[types.InstanceType]
) -> Launch | None:
    body = nodeclaim_builder.build_nodeclaim(plan, pool)
    body["metadata"] = {**body["metadata"], "name": name}
    claim = parse.nodeclaim(body)
    choice = provider.cheapest_launch(tenancy.for_claim(listed, tenancy.choose(claim.spec.requirements)), claim)
    if choice is None:
        return None
    instance_type, offering = choice
    launched = dataclasses.replace(
        claim,
        metadata=dataclasses.replace(
            claim.metadata, labels={**claim.metadata.labels, **instance_type.labels, **offering.labels()}
        ),
    )
    body = manifest.to_manifest(launched)
    body["status"] = {
        "capacity": _quantities(instance_type.capacity),
        "allocatable": _quantities(instance_type.allocatable),
    }
    cheapest = results.CheapestOffering(instance_type.name, offering.zone, offering.capacity_type, offering.price)
    chosen = dataclasses.replace(plan, instance_type_options=(instance_type,), cheapest=cheapest)
    return Launch(name, chosen, body)


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {k: quantity.format_resource(k, v) for k, v in resources.items()}


def in_flight(found: Sequence[Launch]) -> list[scheduler.ExistingNode]:
    """The launched claims as the scheduler sees claims in flight, for simulate and explain alike: the controller's
    cluster model fed their manifests as its informer applies NodeClaims, then the provisioner's snapshot of its
    state nodes (`provisioning.snapshot.existing_nodes`: the claim's labels, taints and allocatable, not
    initialized)."""
    model = state_cluster.Cluster(clock=karpy_clock.ManualClock(0.0))
    for launch in found:
        model.apply(resources.NODECLAIMS, client.WatchEvent(client.ADDED, launch.manifest))
    return snapshot.existing_nodes(model.state_nodes())


def merge(planned: results.Results, found: Sequence[Launch]) -> results.Results:
    """`planned` with the static claims first among the new ones, holding the pods nominated to them, and their
    price in the cost."""
    claims = [
        dataclasses.replace(launch.plan, pods=tuple(planned.existing_nodes.pop(launch.name, ()))) for launch in found
    ]
    planned.new_nodeclaims[:0] = claims
    planned.cost_per_hour += sum(c.cheapest.price for c in claims if c.cheapest is not None)
    return planned
