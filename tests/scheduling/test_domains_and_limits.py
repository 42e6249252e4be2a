"""Topology domains come only from what a pool can really launch; pool limits count existing nodes and claims."""

from __future__ import annotations

import collections

from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, meta, quantity
from karpy.cloudprovider import types
from karpy.scheduling import scheduler

Op = meta.Operator
ON_DEMAND = labels.CAPACITY_TYPE_ON_DEMAND
SPOT = labels.CAPACITY_TYPE_SPOT
GENERATION = "example.com/generation"


def _zone_spread(app: str) -> dict[str, object]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": labels.LABEL_ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    }


def _catalog() -> list[types.InstanceType]:
    """zone-a/zone-b on-demand; zone-c only as spot; zone-d only on a type the pool's requirements exclude."""
    both = scheduling_conftest.make_instance_type(
        "both", cpu=8, memory_gib=16, zones=("zone-a", "zone-b"), extra_labels={GENERATION: "6"}
    )
    spot_c = scheduling_conftest.make_instance_type(
        "spot-c", cpu=8, memory_gib=16, zones=("zone-c",), capacity_types=(SPOT,), extra_labels={GENERATION: "6"}
    )
    old_d = scheduling_conftest.make_instance_type(
        "old-d", cpu=8, memory_gib=16, zones=("zone-d",), extra_labels={GENERATION: "3"}
    )
    return [both, spot_c, old_d]


def test_zone_spread_ignores_zones_the_pool_cannot_launch_in() -> None:
    # Regression (karpy simulate on AWS): a zone reachable only through an offering of another capacity type, or
    # only through an instance type the pool's requirements filter out, used to count as an empty spread domain,
    # so with maxSkew 1 every pod after the second was refused.
    pool = scheduling_conftest.make_nodepool(
        requirements=[
            meta.NodeSelectorRequirement(labels.LABEL_CAPACITY_TYPE, Op.IN, (ON_DEMAND,)),
            meta.NodeSelectorRequirement(GENERATION, Op.GT, ("4",)),
            # a zone the pool names but nothing is offered in is no domain either
            meta.NodeSelectorRequirement(labels.LABEL_ZONE, Op.IN, ("zone-a", "zone-b", "zone-c", "zone-x")),
        ]
    )
    ps = scheduling_conftest.make_pods(6, cpu="500m", labels_={"app": "api"}, spec=_zone_spread("api"))
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=_catalog())
    scheduling_conftest.expect_scheduled(res, *ps)
    per_zone: collections.Counter[str | None] = collections.Counter()
    for claim in res.new_nodeclaims:
        per_zone[scheduling_conftest.zone_of(claim)] += len(claim.pods)
    assert per_zone == {"zone-a": 3, "zone-b": 3}


def test_spot_pool_still_uses_its_spot_only_zone() -> None:
    pool = scheduling_conftest.make_nodepool(
        requirements=[meta.NodeSelectorRequirement(labels.LABEL_CAPACITY_TYPE, Op.IN, (SPOT,))]
    )
    ps = scheduling_conftest.make_pods(3, cpu="500m", labels_={"app": "batch"}, spec=_zone_spread("batch"))
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=_catalog())
    scheduling_conftest.expect_scheduled(res, *ps)
    assert {scheduling_conftest.zone_of(cl) for cl in res.new_nodeclaims} == {"zone-c"}


def _anti(app: str) -> dict[str, object]:
    term = {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _node(name: str, pool: str) -> scheduler.ExistingNode:
    return scheduler.ExistingNode(
        name,
        {labels.LABEL_ZONE: scheduling_conftest.ZONES[0], labels.LABEL_NODEPOOL: pool},
        (),
        {labels.RESOURCE_CPU: 1000, labels.RESOURCE_MEMORY: quantity.GI, labels.RESOURCE_PODS: 10_000},
    )


def test_nodes_limit_counts_existing_nodes_of_the_pool() -> None:
    pool = scheduling_conftest.make_nodepool(limits={labels.RESOURCE_NODES: 3000})
    ps = scheduling_conftest.make_pods(
        5, cpu="2", labels_={"app": "x"}, spec=_anti("x")
    )  # too big for the 1-cpu existing nodes
    res = scheduling_conftest.solve(ps, pools=[pool], existing_nodes=[_node("n-1", "default"), _node("n-2", "default")])
    assert len(res.new_nodeclaims) == 1  # 3 allowed − 2 existing
    assert len(res.unschedulable) == 4
    assert all('nodes limit of nodepool "default" reached' in r for r in res.unschedulable.values())


def test_nodes_limit_ignores_nodes_of_other_pools() -> None:
    pool = scheduling_conftest.make_nodepool(limits={labels.RESOURCE_NODES: 2000})
    ps = scheduling_conftest.make_pods(3, cpu="2", labels_={"app": "x"}, spec=_anti("x"))
    res = scheduling_conftest.solve(ps, pools=[pool], existing_nodes=[_node("n-1", "other"), _node("n-2", "other")])
    assert len(res.new_nodeclaims) == 2
    assert len(res.unschedulable) == 1


def test_nodes_limit_spills_to_the_next_pool_by_weight() -> None:
    small = scheduling_conftest.make_nodepool("small", weight=100, limits={labels.RESOURCE_NODES: 1000})
    big = scheduling_conftest.make_nodepool("big", weight=1)
    ps = scheduling_conftest.make_pods(3, cpu="2", labels_={"app": "x"}, spec=_anti("x"))
    res = scheduling_conftest.solve(ps, pools=[small, big])
    scheduling_conftest.expect_scheduled(res, *ps)
    assert [cl.nodepool for cl in res.new_nodeclaims] == ["small", "big", "big"]


def test_nodes_limit_does_not_cap_pods_per_claim() -> None:
    pool = scheduling_conftest.make_nodepool(limits={labels.RESOURCE_NODES: 1000})
    ps = scheduling_conftest.make_pods(8, cpu="1")
    res = scheduling_conftest.solve(ps, pools=[pool])
    scheduling_conftest.expect_scheduled(res, *ps)
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert len(claim.pods) == 8
