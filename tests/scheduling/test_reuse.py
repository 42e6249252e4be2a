"""A solve over nodes derived once (`scheduler.derive`) and pool catalogs kept across solves (`catalog.Catalogs`), as
a disruption pass's simulations run, places exactly as a solve that builds everything afresh.

Random clusters: existing nodes in three zones with bound pods (spread, anti-affinity, host ports, nearly full
nodes), pending pods of the same kinds, and a series of simulations each leaving a few nodes out and moving their
pods, some nodes inside consolidateAfter. Every solve of the series reuses what the ones before it made.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.scheduling import conftest as scheduling_conftest
from tests.scheduling import test_bulk_equivalence as scheduling_test_bulk_equivalence

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import catalog, nodes, pods, scheduler
from karpy.scheduling import slots as scheduling_slots

KINDS = ("generic", "zone-spread", "host-spread-1", "host-anti", "zone-anti", "zone-affinity")


HOST_PORT = {"containerPort": 8080, "hostPort": 8080, "hostIP": "0.0.0.0"}


def _shape(kind: str, app: str) -> dict[str, Any]:
    """The spec fields of a pod whose constraint of `kind` selects pods labelled app=`app`."""
    return scheduling_test_bulk_equivalence._spec(kind, app)


def _node_labels(i: int) -> dict[str, str]:
    """Node `node-{i}` of pool default: instance type big, in the i-th zone (round robin)."""
    return {
        labels.LABEL_ZONE: scheduling_conftest.ZONES[i % 3],
        labels.LABEL_NODEPOOL: "default",
        labels.LABEL_INSTANCE_TYPE: "big",
    }


cluster = st.lists(  # per node: its pods as (kind, cpu, host port?, the kind whose pods' label it has)
    st.lists(
        st.tuples(
            st.sampled_from(KINDS), st.sampled_from(("500m", "1", "1500m")), st.booleans(), st.sampled_from(KINDS)
        ),
        max_size=4,
    ),
    min_size=1,
    max_size=6,
)
pending = st.lists(  # (kind, cpu, count, host port?, the kind whose pods' label they have)
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(("250m", "1", "2")),
        st.integers(1, 4),
        st.booleans(),
        st.sampled_from(KINDS),
    ),
    max_size=3,
)
simulations = st.lists(st.tuples(st.sets(st.integers(0, 5), max_size=2), st.sets(st.integers(0, 5))), max_size=4)


def _series(
    per_node: list[list[tuple[str, str, bool, str]]],
    waiting: list[tuple[str, str, int, bool, str]],
    series: list[tuple[set[int], set[int]]],
) -> tuple[list[scheduler.SchedulingInput], list[scheduler.SchedulingInput]]:
    """The solves of a disruption pass, one per (nodes leaving, nodes settling): as the pass makes them (nodes
    derived once, with their pods; one catalog cache) and as a reference that shares nothing and tells the solver
    of bound pods through `bound_pods`, which it works out pod by pod."""
    port = (pods.HostPort(port=8080, protocol="TCP", ip="0.0.0.0"),)
    nodes = [
        builders.parsed_existing_node(f"node-{i}", labels=_node_labels(i), pods="8", bound=[
            builders.parsed_pod(f"n{i}-{j}", cpu=cpu, memory="1Gi", node=f"node-{i}", labels={"app": f"app-{like}"},
                                ports=[HOST_PORT] if taken else [], **_shape(kind, f"app-{kind}"))
            for j, (kind, cpu, taken, like) in enumerate(specs)
        ])
        for i, specs in enumerate(per_node)
    ]  # fmt: skip
    queued = [
        dataclasses.replace(p, host_ports=port if taken else ())
        for g, (kind, cpu, n, taken, like) in enumerate(waiting)
        for p in scheduling_conftest.make_pods(
            n,
            f"w{g}",
            cpu=cpu,
            **scheduling_test_bulk_equivalence._spec(kind, f"app-{kind}"),
            labels={"app": f"app-{like}"},
        )
    ]
    derived = [scheduler.derive(n) for n in nodes]
    pool, types, shared = (
        builders.parsed_nodepool(requirements=[]),
        {"default": scheduling_conftest.fake_catalog(8)},
        catalog.Catalogs(),
    )
    reused, reference = [], []
    for leaving, settling in [(set(), set()), *series]:
        moving = [
            dataclasses.replace(p, node_name="", from_candidate=True)
            for i, n in enumerate(nodes)
            if i in leaving
            for p in n.pods
        ]
        kept = [
            dataclasses.replace(n, under_consolidate_after=i in settling)
            for i, n in enumerate(derived)
            if i not in leaving
        ]
        inp = scheduler.SchedulingInput(
            pods=[*moving, *queued],
            nodepools=[pool],
            instance_types=types,
            existing_nodes=kept,
            compute_lower_bound=False,
            catalogs=shared,
        )
        reused.append(inp)
        bare = [dataclasses.replace(n, pods=(), derived=None) for n in kept]
        reference.append(
            dataclasses.replace(
                inp,
                nodepools=[builders.parsed_nodepool(requirements=[])],
                instance_types={"default": scheduling_conftest.fake_catalog(8)},
                existing_nodes=bare,
                bound_pods=[p for n in nodes for p in n.pods],
                catalogs=None,
            )
        )
    return reused, reference


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cluster, pending, simulations)
def test_reused_set_up_places_as_a_fresh_one(
    per_node: list[list[tuple[str, str, bool, str]]],
    waiting: list[tuple[str, str, int, bool, str]],
    series: list[tuple[set[int], set[int]]],
) -> None:
    reused, reference = _series(per_node, waiting, series)
    assert [scheduling_test_bulk_equivalence._shape(scheduler.solve(inp)) for inp in reused] == [
        scheduling_test_bulk_equivalence._shape(scheduler.solve(inp)) for inp in reference
    ]


def test_existing_nodes_enter_the_table_as_one_by_one() -> None:
    """`SlotTable.add_nodes` (a solve's thousands of nodes at once) leaves the table as `add` per node does."""
    index = catalog.ResourceIndex.build([{labels.RESOURCE_CPU: 1}])
    made = [scheduling_slots.SlotTable(len(index.names)) for _ in range(2)]
    added = [
        nodes.node_slot(
            f"n{i}",
            requirements.Requirements.from_labels({labels.LABEL_ZONE: scheduling_conftest.ZONES[i % 3]}),
            (),
            alloc=index.capacity_vector({labels.RESOURCE_CPU: 1000 * i}),
            used=index.vector({labels.RESOURCE_CPU: 100 * i}),
            host_ports=(),
        )
        for i in range(300)  # past the table's first rows
    ]
    made[0].pinned(labels.LABEL_ZONE, np.arange(0))  # a key column, to be filled for the nodes added after it
    made[1].pinned(labels.LABEL_ZONE, np.arange(0))
    for slot in added:
        made[0].add(slot)
    made[1].add_nodes(added)
    one, bulk_added = made
    assert one.n == bulk_added.n == 300
    assert (one.cap[:300] == bulk_added.cap[:300]).all()
    assert (one.used[:300] == bulk_added.used[:300]).all()
    everyone = np.arange(300)
    assert (
        one.pinned(labels.LABEL_ZONE, everyone)[0].tolist()
        == bulk_added.pinned(labels.LABEL_ZONE, everyone)[0].tolist()
    )
    assert (
        one.fitting(index.vector({labels.RESOURCE_CPU: 5000})).tolist()
        == bulk_added.fitting(index.vector({labels.RESOURCE_CPU: 5000})).tolist()
    )


def test_pods_listed_twice_or_apart_are_placed_as_before() -> None:
    """A pod on two nodes counts on the last; `bound_pods` adds pods to nodes: what was derived per node does not
    cover these, and the solve works them out pod by pod."""
    twice = builders.parsed_pod(
        "twice", cpu="3", memory="1Gi", node="node-0", labels={"app": "app-x"}, **_shape("host-anti", "app-x")
    )
    extra = builders.parsed_pod("extra", cpu="3", memory="1Gi", node="node-1", labels={"app": "app-y"})
    nodes = [
        builders.parsed_existing_node(f"node-{i}", labels=_node_labels(i), pods="8", bound=[twice]) for i in (0, 1)
    ]
    waiting = scheduling_conftest.make_pods(
        2, "w", cpu="2", labels={"app": "app-x"}, **scheduling_test_bulk_equivalence._spec("host-anti", "app-x")
    )
    inp = scheduler.SchedulingInput(
        pods=waiting,
        nodepools=[builders.parsed_nodepool(requirements=[])],
        instance_types={"default": scheduling_conftest.fake_catalog(8)},
        existing_nodes=nodes,
        bound_pods=[extra],
        compute_lower_bound=False,
    )
    derived = dataclasses.replace(inp, existing_nodes=[scheduler.derive(n) for n in nodes])
    placed = scheduler.solve(derived)
    assert scheduling_test_bulk_equivalence._shape(placed) == scheduling_test_bulk_equivalence._shape(
        scheduler.solve(inp)
    )
    # `twice` counts on node-1 (listed last), which `extra` fills: node-0 is free, for one pod (anti-affinity)
    assert {k: [p.name for p in v] for k, v in placed.existing_nodes.items()} == {"node-0": ["w-0"]}
    assert len(placed.new_nodeclaims) == 1


def test_a_catalog_is_reused_only_for_the_same_inputs() -> None:
    pool, types = builders.parsed_nodepool(requirements=[]), scheduling_conftest.fake_catalog(4)
    index = catalog.ResourceIndex.build([t.allocatable for t in types])
    cache = catalog.Catalogs()
    first = cache.get(pool, types, index=index, daemons=())
    assert cache.get(pool, types, index=index, daemons=()) is first
    wider = catalog.ResourceIndex.build([*(t.allocatable for t in types), {"example.com/gpu": 1000}])
    assert cache.get(pool, types, index=wider, daemons=()).index is wider
    assert cache.get(pool, types, index=index, daemons=()) is first, "one per index"
    daemon = builders.parsed_pod("daemon", cpu="100m", memory="1Gi")
    assert cache.get(pool, types, index=index, daemons=(daemon,)) is not first
    assert cache.get(pool, list(types), index=index, daemons=()) is not first


def test_what_solves_share_cannot_be_changed_by_one() -> None:
    bound = builders.parsed_pod("a", cpu="1", memory="1Gi", node="node-0", labels={"app": "app"})
    node = scheduler.derive(builders.parsed_existing_node("node-0", labels=_node_labels(0), pods="8", bound=[bound]))
    assert node.derived is not None
    index = catalog.ResourceIndex.build([node.allocatable])
    alloc, used = node.derived.columns(node, index)
    assert used[0] == 1000
    with pytest.raises(ValueError, match="read-only"):
        used += 1
    made = catalog.PoolCatalog(
        builders.parsed_nodepool(requirements=[]), scheduling_conftest.fake_catalog(4), index=index
    )
    with pytest.raises(ValueError, match="read-only"):
        made.usable[0, 0] = 0
    assert node.derived.columns(node, index)[0] is alloc, "made once per index"


@pytest.mark.parametrize("derive", [False, True])
def test_a_bound_pods_anti_affinity_keeps_the_pods_it_selects_away(derive: bool) -> None:
    """The pending pod has no constraint of its own: only the bound pod's term (its inverse group) refuses node-0."""
    keeper = builders.parsed_pod(
        "keeper", cpu="500m", memory="1Gi", node="node-0", labels={"app": "app-db"}, **_shape("host-anti", "app-web")
    )
    node = builders.parsed_existing_node("node-0", labels=_node_labels(0), pods="8", bound=[keeper])
    inp = scheduler.SchedulingInput(
        pods=scheduling_conftest.make_pods(1, "web", cpu="250m", labels={"app": "app-web"}),
        nodepools=[builders.parsed_nodepool(requirements=[])],
        instance_types={"default": scheduling_conftest.fake_catalog(8)},
        existing_nodes=[scheduler.derive(node) if derive else node],
        compute_lower_bound=False,
    )
    placed = scheduler.solve(inp)
    assert placed.existing_nodes == {}
    assert [[p.name for p in claim.pods] for claim in placed.new_nodeclaims] == [["web-0"]]
