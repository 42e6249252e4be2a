"""Spot-to-spot consolidation with the SpotToSpotConsolidation gate on (core disruption/consolidation.go
`computeSpotToSpotConsolidation`, cases after its suite): a spot node is replaced by a cheaper spot node only when
at least 15 cheaper spot types are possible, and then from the 15 cheapest only (launching the cheapest of a short
list again and again would churn onto ever less available pools); several spot nodes merge into one cheaper spot
node without that minimum; the replacement is pinned to spot."""

from __future__ import annotations

from tests import builders
from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import generator
from karpy.disruption import consolidation

Reason = nodepool.DisruptionReason


def catalog(cheaper: int) -> list[types.InstanceType]:
    """A 16-CPU type at $1.00 spot and `cheaper` 4-CPU types whose spot prices climb from $0.10 by one cent."""
    big = disruption_world.instance_type("big", 16, 2.0, 1.0)
    small = [disruption_world.instance_type(f"t{i:02d}", 4, 0.9, 0.10 + 0.01 * i) for i in range(cheaper)]
    return [big, *small]


def spot_world(cheaper: int) -> disruption_world.World:
    w = disruption_world.World(catalog(cheaper))
    w.pool(capacity_types=("spot", "on-demand"))  # the pin to spot is the consolidation's, not the pool's
    return w


async def test_a_spot_node_is_replaced_from_the_fifteen_cheapest_spot_types() -> None:
    w = spot_world(20)
    w.node("s", itype="big", capacity_type="spot")
    w.pod("p", "s", cpu="1")
    cmd = await w.reconcile(w.controller(spot_to_spot=True))
    assert cmd is not None
    assert (cmd.reason, cmd.decision, cmd.method) == (Reason.UNDERUTILIZED, "replace", "single-node-consolidation")
    (plan,) = cmd.replacements
    assert [t.name for t in plan.instance_type_options] == [f"t{i:02d}" for i in range(15)]
    capacity = plan.requirements.get(labels.LABEL_CAPACITY_TYPE)
    assert capacity is not None
    assert capacity.values() == frozenset({labels.CAPACITY_TYPE_SPOT})
    assert round(cmd.savings, 2) == 0.90  # $1.00 spot node for the $0.10 cheapest option


async def test_fewer_than_fifteen_cheaper_spot_types_leave_the_node_alone() -> None:
    w = spot_world(14)
    w.node("s", itype="big", capacity_type="spot")
    w.pod("p", "s", cpu="1")
    assert await w.reconcile(w.controller(spot_to_spot=True)) is None
    messages = [e.message for e in w.recorder.events if e.reason == "Unconsolidatable"]
    expected = (
        f"SpotToSpotConsolidation requires {consolidation.MIN_SPOT_TO_SPOT_TYPES} cheaper instance type options "
        "than the current candidate to consolidate, got 14"
    )
    assert expected in messages


async def test_two_spot_nodes_merge_into_one_cheaper_spot_node_without_the_minimum() -> None:
    w = spot_world(3)
    w.node("s1", itype="big", capacity_type="spot")
    w.node("s2", itype="big", capacity_type="spot")
    w.pod("p1", "s1", cpu="1")
    w.pod("p2", "s2", cpu="1")
    cmd = await w.reconcile(w.controller(spot_to_spot=True))
    assert cmd is not None
    assert cmd.method == "multi-node-consolidation"
    assert sorted(c.name for c in cmd.candidates) == ["s1", "s2"]
    (plan,) = cmd.replacements
    assert [t.name for t in plan.instance_type_options] == ["t00", "t01", "t02"]
    capacity = plan.requirements.get(labels.LABEL_CAPACITY_TYPE)
    assert capacity is not None
    assert capacity.values() == frozenset({labels.CAPACITY_TYPE_SPOT})


async def test_the_gate_off_keeps_the_spot_node() -> None:
    w = spot_world(20)
    w.node("s", itype="big", capacity_type="spot")
    w.pod("p", "s", cpu="1")
    assert await w.reconcile(w.controller()) is None


async def test_cheaper_options_must_still_meet_every_keys_min_values() -> None:
    """core disruption/consolidation.go: the cheaper options are filtered by price and minValues together
    (RemoveInstanceTypeOptionsByPriceAndMinValues), over every key that sets one, not only the instance type."""
    catalog_ = catalog(3)  # the "big" type is the only one of size "large"; the cheaper ones are all "small"
    sizes = builders.requirement(generator.LABEL_SIZE, "Exists", min_values=2)
    w = disruption_world.World(catalog_)
    w.pool(requirements=[sizes])
    w.node("n", itype="big")
    w.pod("p", "n", cpu="1")
    assert await w.reconcile(w.controller()) is None
    messages = [e.message for e in w.recorder.events if e.reason == "Unconsolidatable"]
    assert "minValues requirement is not met by the cheaper instance types" in messages
    w = disruption_world.World(catalog_)
    w.pool(requirements=[builders.requirement(generator.LABEL_SIZE, "Exists", min_values=1)])
    w.node("n", itype="big")
    w.pod("p", "n", cpu="1")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert [t.name for t in cmd.replacements[0].instance_type_options] == ["t00", "t01", "t02"]
