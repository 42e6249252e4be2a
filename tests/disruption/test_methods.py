"""Table tests for the pure consolidation rules: replacement pricing (worst launch price), the Balanced policy,
single-node consolidation's round-robin over pools, and the multi/single-node timeouts on a manual clock."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from tests.disruption import world as disruption_world

from karpy import clock as karpy_clock
from karpy import requirements
from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import generator
from karpy.disruption import blockers, candidates, consolidation, methods, simulation
from karpy.scheduling import results

Reason = nodepool.DisruptionReason
OD, SPOT, RESERVED = labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_RESERVED
candidate = disruption_world.candidate


def offering(capacity_type: str, price: float, *, zone: str = "a", available: bool = True) -> types.Offering:
    return types.Offering(zone=zone, capacity_type=capacity_type, price=price, available=available)


def itype(name: str, *offerings: types.Offering) -> types.InstanceType:
    return generator.new_instance_type(name, offerings=list(offerings))


def reqs(**values: Sequence[str]) -> requirements.Requirements:
    keys = {"capacity_type": labels.LABEL_CAPACITY_TYPE, "zone": labels.LABEL_ZONE}
    return requirements.Requirements(requirements.Requirement.in_(keys[k], v) for k, v in values.items())


# --- replacement pricing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offerings", "constraint", "worst"),
    [
        # spot is launched before on-demand, so spot's price bounds the launch, not the dearer on-demand one
        ([offering(OD, 0.20), offering(SPOT, 0.08)], {}, 0.08),
        ([offering(OD, 0.20), offering(SPOT, 0.08)], {"capacity_type": [OD]}, 0.20),
        # the dearest offering of that capacity type, even when on-demand would be cheaper
        ([offering(SPOT, 0.08), offering(SPOT, 0.18, zone="b"), offering(OD, 0.10)], {}, 0.18),
        ([offering(SPOT, 0.08), offering(SPOT, 0.18, zone="b")], {"zone": ["a"]}, 0.08),
        # reserved comes first; an unavailable offering does not count
        ([offering(RESERVED, 0.05), offering(SPOT, 0.08), offering(OD, 0.20)], {}, 0.05),
        ([offering(RESERVED, 0.01, available=False), offering(SPOT, 0.08)], {}, 0.08),
        ([offering(OD, 0.20)], {"capacity_type": [SPOT]}, math.inf),
        ([offering(SPOT, 0.08, available=False)], {}, math.inf),
    ],
)
def test_worst_launch_price(offerings: list[types.Offering], constraint: dict[str, list[str]], worst: float) -> None:
    assert consolidation.worst_launch_price(itype("t", *offerings), reqs(**constraint)) == worst


def test_filter_by_price_keeps_types_whose_worst_launch_price_is_below_the_candidates() -> None:
    spot_cheap = itype("spot-cheap", offering(OD, 0.30), offering(SPOT, 0.10))
    od_only = itype("od-only", offering(OD, 0.12))
    dear = itype("dear", offering(OD, 0.30), offering(SPOT, 0.25))
    options = (spot_cheap, od_only, dear)
    assert [t.name for t in consolidation.filter_by_price(options, reqs(), 0.20)] == ["spot-cheap", "od-only"]
    assert [t.name for t in consolidation.filter_by_price(options, reqs(capacity_type=[OD]), 0.20)] == ["od-only"]
    assert consolidation.filter_by_price(options, reqs(), 0.10) == ()  # strictly cheaper


def _replacing_with(
    options: Sequence[types.InstanceType], constraint: requirements.Requirements
) -> simulation.Simulate:
    plan = results.PlannedNodeClaim(
        nodepool="default",
        requirements=constraint,
        instance_type_options=tuple(options),
        pods=(),
        requests={},
        cheapest=None,
    )

    def simulate(chosen: Sequence[candidates.Candidate], /, *, consolidation: bool = True) -> simulation.Simulation:
        return simulation.Simulation(replacements=(plan,), unschedulable={})

    return simulate


@pytest.mark.parametrize(
    ("allowed", "offered", "decision", "pinned_spot"),
    [
        # on-demand → spot: the on-demand price (0.25) is above the candidate's, the spot one is not
        ([OD, SPOT], [offering(OD, 0.25), offering(SPOT, 0.08)], "replace", True),
        ([OD], [offering(OD, 0.25), offering(SPOT, 0.08)], blockers.Kind.NOT_CHEAPER, False),
        ([OD, SPOT], [offering(OD, 0.15)], "replace", False),  # nothing spot to pin to
        ([OD, SPOT], [offering(OD, 0.15), offering(SPOT, 0.25)], blockers.Kind.NOT_CHEAPER, False),
    ],
)
def test_on_demand_candidate_replacement(
    allowed: list[str], offered: list[types.Offering], decision: str, pinned_spot: bool
) -> None:
    simulate = _replacing_with([itype("r", *offered)], reqs(capacity_type=allowed))
    got = consolidation.compute([candidate("n", price=0.20)], simulate, method="single-node-consolidation")
    if isinstance(got, blockers.Blocker):
        assert got.kind == decision
        return
    assert got.decision == decision
    ct = got.replacements[0].requirements.get(labels.LABEL_CAPACITY_TYPE)
    assert ct is not None
    assert (ct.values() == frozenset({SPOT})) == pinned_spot


def test_multi_node_same_type_ceiling_ignores_a_candidate_type_the_price_filter_dropped() -> None:
    # core disruption/multinodeconsolidation.go: filterOutSameInstanceType runs on computeConsolidation's replacement,
    # already filtered by price. c4 runs here at 0.20 in zone a but launches at up to 0.40 (zone b), so the price
    # filter (0.30 for both nodes) drops it, and it sets no same-type ceiling: u at 0.25 replaces both nodes.
    c4 = itype("c4", offering(OD, 0.20, zone="a"), offering(OD, 0.40, zone="b"))
    u = itype("u", offering(OD, 0.25, zone="a"), offering(OD, 0.25, zone="b"))
    simulate = _replacing_with([c4, u], reqs(capacity_type=[OD]))
    chosen = [candidate("big", price=0.20, itype="c4"), candidate("small", price=0.10, itype="c2")]
    got = consolidation.compute(chosen, simulate, method="multi-node-consolidation", single=False)
    assert isinstance(got, consolidation.Command), got
    assert [t.name for t in got.replacements[0].instance_type_options] == ["u"]
    assert round(got.savings, 6) == 0.05
    # a candidate type the price filter keeps still caps the replacement at that candidate's price
    cheap_c4 = itype("c4", offering(OD, 0.20, zone="a"), offering(OD, 0.20, zone="b"))
    simulate = _replacing_with([cheap_c4, u], reqs(capacity_type=[OD]))
    got = consolidation.compute(chosen, simulate, method="multi-node-consolidation", single=False)
    assert isinstance(got, blockers.Blocker)
    assert got.kind == blockers.Kind.NOT_CHEAPER


# --- Balanced -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("savings", "disruption", "pool_cost", "pool_disruption", "ok"),
    [
        (0.5, 1.0, 1.0, 1.0, True),  # (0.5/1) / (1/1) = 0.5 = 1/K: on the line is enough
        (0.49, 1.0, 1.0, 1.0, False),
        (0.1, 1.0, 1.0, 10.0, True),  # a small share of the pool's disruption buys a small saving
        (0.1, 5.0, 1.0, 10.0, False),
        (0.0, 1.0, 1.0, 1.0, False),  # saves nothing
        (-0.1, 1.0, 1.0, 1.0, False),
        (0.1, 1.0, 0.0, 1.0, False),  # a pool that costs nothing cannot save
        (0.1, 0.0, 1.0, 1.0, True),  # moves nothing that costs disruption
        (0.1, 1.0, 1.0, 0.0, True),
    ],
)
def test_balanced_ok(savings: float, disruption: float, pool_cost: float, pool_disruption: float, ok: bool) -> None:
    got = consolidation.balanced_ok(
        savings=savings, disruption=disruption, pool_cost=pool_cost, pool_disruption=pool_disruption
    )
    assert got is ok


@pytest.mark.parametrize(
    ("policy", "moved_cost", "allowed"),
    [
        # the pool costs 1.0 $/h and 4.0 disruption; deleting a 0.25 $/h node saves a quarter of its cost
        ("Balanced", 2.0, True),  # (0.25/1) / (2/4) = 0.5 ≥ 1/2
        ("Balanced", 3.0, False),  # (0.25/1) / (3/4) = 0.33
        ("WhenEmptyOrUnderutilized", 3.0, True),  # other policies do not weigh disruption
    ],
)
def test_balanced_allows_one_pool(policy: str, moved_cost: float, allowed: bool) -> None:
    moved = candidate("moved", policy=policy, price=0.25, reschedule_cost=moved_cost)
    rest = candidate("rest", policy=policy, price=0.75, reschedule_cost=4.0 - moved_cost)
    command = consolidation.Command("single-node-consolidation", Reason.UNDERUTILIZED, (moved,))
    assert consolidation.balanced_allows(command, [moved, rest]) is allowed


def test_balanced_allows_asks_every_balanced_pool_for_its_share_of_the_savings() -> None:
    # Two pools of 1.0 $/h and 4.0 disruption each; a command deletes 0.2 $/h from each (savings 0.4, split by
    # price: 0.2 each). Pool "a" moves 1.0 disruption, (0.2/1)/(1/4) = 0.8: fine; pool "b" moves 3.0, 0.27: refused.
    a_moved = candidate("a1", pool="a", policy="Balanced", price=0.2, reschedule_cost=1.0)
    a_rest = candidate("a2", pool="a", policy="Balanced", price=0.8, reschedule_cost=3.0)
    b_moved = candidate("b1", pool="b", policy="Balanced", price=0.2, reschedule_cost=3.0)
    b_rest = candidate("b2", pool="b", policy="Balanced", price=0.8, reschedule_cost=1.0)
    members = [a_moved, a_rest, b_moved, b_rest]
    both = consolidation.Command("multi-node-consolidation", Reason.UNDERUTILIZED, (a_moved, b_moved))
    only_a = consolidation.Command("multi-node-consolidation", Reason.UNDERUTILIZED, (a_moved,))
    assert not consolidation.balanced_allows(both, members)
    assert consolidation.balanced_allows(only_a, members)


# --- single-node order ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ordered", "first", "expected"),
    [
        (["a1", "a2", "b1", "b2", "c1"], [], ["a1", "b1", "c1", "a2", "b2"]),
        (["b1", "a1", "a2", "b2"], [], ["b1", "a1", "b2", "a2"]),  # pools take turns in first-sight order
        (["a1", "a2", "b1", "b2", "c1"], ["c"], ["c1", "a1", "b1", "a2", "b2"]),
        (["a1", "a2", "b1", "c1", "c2"], ["c", "b"], ["c1", "b1", "a1", "c2", "a2"]),
        (["a1", "a2"], ["gone"], ["a1", "a2"]),  # a pool with no candidates left is skipped
        ([], ["c"], []),
    ],
)
def test_interleave(ordered: list[str], first: list[str], expected: list[str]) -> None:
    cands = [candidate(name, pool=name[0]) for name in ordered]
    assert [c.name for c in methods.interleave(cands, first=first)] == expected


class _SlowSimulation:
    """Every simulation takes `cost` virtual seconds and ends as `outcome`; remembers whom it was asked about."""

    def __init__(self, clock: karpy_clock.ManualClock, *, cost: float, fits: bool) -> None:
        self.clock, self.cost, self.fits = clock, cost, fits
        self.asked: list[list[str]] = []

    def __call__(
        self, chosen: Sequence[candidates.Candidate], /, *, consolidation: bool = True
    ) -> simulation.Simulation:
        self.asked.append([c.name for c in chosen])
        self.clock.advance(self.cost)
        unschedulable = {} if self.fits else {"default/p": "no room"}
        return simulation.Simulation(replacements=(), unschedulable=unschedulable)


def _context(
    clock: karpy_clock.ManualClock,
    cands: Sequence[candidates.Candidate],
    simulate: simulation.Simulate,
    *,
    seq: int = 1,
) -> methods.Context:
    budgets = {Reason.UNDERUTILIZED: {c.pool.name: 100 for c in cands}}
    return methods.Context(clock=clock, seq=seq, graceful=cands, eventual=(), budgets=budgets, simulate=simulate)


@pytest.mark.parametrize(
    ("nodes", "cost", "first", "second"),
    [
        # 200 s after a1 and b1: past the 180 s timeout before c1. Pool c, never reached, leads the next pass; a
        # and b, which were reached, keep their turns after it.
        (["a1", "b1", "c1", "a2"], 100.0, ["a1", "b1"], ["c1", "a1"]),
        # cut off before b2, but every pool was reached: the next pass keeps the usual order
        (["a1", "b1", "a2", "b2"], 70.0, ["a1", "b1", "a2"], ["a1", "b1", "a2"]),
    ],
)
def test_single_node_gives_up_after_three_minutes_and_leads_with_the_pools_it_never_reached(
    nodes: list[str], cost: float, first: list[str], second: list[str]
) -> None:
    clock = karpy_clock.ManualClock()
    cands = [candidate(n, pool=n[0], price=1.0 - i / 10) for i, n in enumerate(nodes)]  # most savings first
    sim = _SlowSimulation(clock, cost=cost, fits=False)
    method = methods.SingleNodeConsolidation()
    assert method.compute(_context(clock, cands, sim)) is None
    assert sim.asked == [[n] for n in first]
    sim.asked.clear()  # same cluster state, but a pass that timed out is not memoized as "nothing to do"
    assert method.compute(_context(clock, cands, sim)) is None
    assert sim.asked == [[n] for n in second]


def test_single_node_completes_below_the_timeout_and_then_memoizes() -> None:
    clock = karpy_clock.ManualClock()
    cands = [candidate("a1", pool="a"), candidate("b1", pool="b")]
    sim = _SlowSimulation(clock, cost=89.0, fits=False)
    method = methods.SingleNodeConsolidation()
    assert method.compute(_context(clock, cands, sim)) is None
    assert sim.asked == [["a1"], ["b1"]]
    assert method.compute(_context(clock, cands, sim)) is None  # same seq: nothing changed, nothing to redo
    assert len(sim.asked) == 2


@pytest.mark.parametrize("method_type", [methods.MultiNodeConsolidation, methods.SingleNodeConsolidation])
def test_a_pass_a_budget_held_back_is_not_memoized(
    method_type: type[methods.MultiNodeConsolidation] | type[methods.SingleNodeConsolidation],
) -> None:
    # core disruption/multinodeconsolidation.go and singlenodeconsolidation.go: "if there are no candidates because
    # of a budget, don't mark as consolidated": a budget window may open while the cluster stays the same
    clock = karpy_clock.ManualClock()
    cands = [candidate(n, pool=n[0], price=1.0 - i / 10) for i, n in enumerate(["a1", "a2", "b1", "b2"])]
    sim = _SlowSimulation(clock, cost=1.0, fits=False)
    budgets = {Reason.UNDERUTILIZED: {"a": 0, "b": 100}}
    ctx = methods.Context(clock=clock, seq=1, graceful=cands, eventual=(), budgets=budgets, simulate=sim)
    method = method_type()
    assert method.compute(ctx) is None
    first = len(sim.asked)
    assert first > 0
    assert all(n.startswith("b") for asked in sim.asked for n in asked)
    assert method.compute(ctx) is None  # same seq, but pool a was held back: computed again
    assert len(sim.asked) == 2 * first
    open_ctx = _context(clock, cands, sim)  # no budget holds anyone back: memoized once nothing is found
    assert method.compute(open_ctx) is None
    asked = len(sim.asked)
    assert method.compute(open_ctx) is None
    assert len(sim.asked) == asked


@pytest.mark.parametrize(
    ("cost", "expected_sizes", "command_size"),
    [
        # 6 candidates: binary search over prefixes of 2..6 nodes; every simulation fits (a delete), so it grows
        (1.0, [4, 5, 6], 6),
        (25.0, [4, 5, 6], 6),  # the last step starts at 50 s, before the 60 s timeout
        (40.0, [4, 5], 5),  # 80 s after the second step: stop there with its command
        (61.0, [4], 4),  # the first step alone passed the timeout
    ],
)
def test_multi_node_binary_search_stops_at_one_minute_with_its_last_good_command(
    cost: float, expected_sizes: list[int], command_size: int
) -> None:
    clock = karpy_clock.ManualClock()
    cands = [candidate(f"n{i}", price=1.0 - i / 10) for i in range(6)]
    sim = _SlowSimulation(clock, cost=cost, fits=True)
    command = methods.MultiNodeConsolidation().compute(_context(clock, cands, sim))
    assert [len(a) for a in sim.asked] == expected_sizes
    assert command is not None
    assert len(command.candidates) == command_size
    assert command.decision == "delete"
