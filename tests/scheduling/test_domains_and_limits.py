"""Topology domains come only from what a pool can really launch; pool limits count existing nodes and claims."""

from __future__ import annotations

import collections

from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, meta
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


def _one_cpu_nodes(pool: str) -> list[scheduler.ExistingNode]:
    """Nodes n-1 and n-2 of `pool` in the first zone, 1 cpu, 1Gi and 10 pods each."""
    zone_and_pool = {labels.LABEL_ZONE: scheduling_conftest.ZONES[0], labels.LABEL_NODEPOOL: pool}
    return [
        builders.parsed_existing_node(name, labels=zone_and_pool, cpu="1", memory="1Gi", pods="10")
        for name in ("n-1", "n-2")
    ]


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
    pool = builders.parsed_nodepool(
        requirements=[
            builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", ON_DEMAND),
            builders.requirement(GENERATION, "Gt", "4"),
            # a zone the pool names but nothing is offered in is no domain either
            builders.requirement(labels.LABEL_ZONE, "In", "zone-a", "zone-b", "zone-c", "zone-x"),
        ]
    )
    ps = scheduling_conftest.make_pods(6, cpu="500m", labels={"app": "api"}, **_zone_spread("api"))
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=_catalog())
    scheduling_conftest.expect_scheduled(res, *ps)
    per_zone: collections.Counter[str | None] = collections.Counter()
    for claim in res.new_nodeclaims:
        per_zone[scheduling_conftest.zone_of(claim)] += len(claim.pods)
    assert per_zone == {"zone-a": 3, "zone-b": 3}


def test_spot_pool_still_uses_its_spot_only_zone() -> None:
    pool = builders.parsed_nodepool(requirements=[builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", SPOT)])
    ps = scheduling_conftest.make_pods(3, cpu="500m", labels={"app": "batch"}, **_zone_spread("batch"))
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=_catalog())
    scheduling_conftest.expect_scheduled(res, *ps)
    assert {scheduling_conftest.zone_of(cl) for cl in res.new_nodeclaims} == {"zone-c"}


def _anti(app: str) -> dict[str, object]:
    term = {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def test_nodes_limit_counts_existing_nodes_of_the_pool() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_NODES: "3"}, requirements=[])
    ps = scheduling_conftest.make_pods(5, cpu="2", labels={"app": "x"}, **_anti("x"))  # too big for the 1-cpu nodes
    res = scheduling_conftest.solve(ps, pools=[pool], existing_nodes=_one_cpu_nodes("default"))
    assert len(res.new_nodeclaims) == 1  # 3 allowed − 2 existing
    assert len(res.unschedulable) == 4
    assert all('nodes limit of nodepool "default" reached' in r for r in res.unschedulable.values())


def test_nodes_limit_ignores_nodes_of_other_pools() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_NODES: "2"}, requirements=[])
    ps = scheduling_conftest.make_pods(3, cpu="2", labels={"app": "x"}, **_anti("x"))
    res = scheduling_conftest.solve(ps, pools=[pool], existing_nodes=_one_cpu_nodes("other"))
    assert len(res.new_nodeclaims) == 2
    assert len(res.unschedulable) == 1


def test_nodes_limit_spills_to_the_next_pool_by_weight() -> None:
    small = builders.parsed_nodepool("small", weight=100, limits={labels.RESOURCE_NODES: "1"}, requirements=[])
    big = builders.parsed_nodepool("big", weight=1, requirements=[])
    ps = scheduling_conftest.make_pods(3, cpu="2", labels={"app": "x"}, **_anti("x"))
    res = scheduling_conftest.solve(ps, pools=[small, big])
    scheduling_conftest.expect_scheduled(res, *ps)
    assert [cl.nodepool for cl in res.new_nodeclaims] == ["small", "big", "big"]


def test_nodes_limit_does_not_cap_pods_per_claim() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_NODES: "1"}, requirements=[])
    ps = scheduling_conftest.make_pods(8, cpu="1")
    res = scheduling_conftest.solve(ps, pools=[pool])
    scheduling_conftest.expect_scheduled(res, *ps)
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert len(claim.pods) == 8
