"""Waves of drift replacements under a NodePool's Drifted budgets and their schedules (pure)."""

from __future__ import annotations

from typing import Any

from tests import builders

from karpy.api import decoding
from karpy.plan import waves

MONDAY_10 = decoding.timestamp("2027-01-18T10:00:00Z")
STEP = 600.0


def budgeted(*budgets: dict[str, Any]) -> Any:
    return builders.parsed_nodepool(disruption={"budgets": list(budgets), "consolidateAfter": "30s"})


def test_a_percentage_makes_waves_of_its_share_rounded_up() -> None:
    found = waves.schedule(budgeted({"nodes": "10%"}), 37, total=40, now=MONDAY_10, replacement=STEP)
    assert [w.nodes for w in found.waves] == [4] * 9 + [1]
    assert [w.start for w in found.waves] == [MONDAY_10 + i * STEP for i in range(10)]
    assert found.finish == MONDAY_10 + 10 * STEP
    assert found.largest == 4


def test_nodes_already_disrupting_use_up_the_first_wave() -> None:
    found = waves.schedule(budgeted({"nodes": "4"}), 6, total=40, disrupting=3, now=MONDAY_10, replacement=STEP)
    assert [w.nodes for w in found.waves] == [1, 4, 1]


def test_a_schedule_that_allows_none_delays_the_waves_until_it_ends() -> None:
    # Business hours (09:00-17:00 UTC on weekdays) allow no drift; the rest of the day, two nodes at a time.
    business = {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}
    found = waves.schedule(budgeted(business, {"nodes": "2"}), 3, total=10, now=MONDAY_10, replacement=STEP)
    assert [(decoding.format_timestamp(w.start), w.nodes) for w in found.waves] == [
        ("2027-01-18T17:00:00Z", 2),
        ("2027-01-18T17:10:00Z", 1),
    ]


def test_a_budget_for_other_reasons_does_not_hold_drift() -> None:
    found = waves.schedule(
        budgeted({"nodes": "0", "reasons": ["Underutilized"]}), 3, total=3, now=MONDAY_10, replacement=STEP
    )
    assert [w.nodes for w in found.waves] == [3]
    assert waves.describe(budgeted({"nodes": "0", "reasons": ["Underutilized"]}, {"nodes": "5%"})) == ["5%"]


def test_a_budget_that_never_allows_drift_blocks_it() -> None:
    found = waves.schedule(budgeted({"nodes": "0"}), 3, total=3, now=MONDAY_10)
    assert (found.waves, found.finish, found.blocked) == ((), None, 3)


def test_nothing_drifting_makes_no_waves() -> None:
    assert waves.schedule(budgeted({"nodes": "1"}), 0, total=3, now=MONDAY_10) == waves.Schedule((), None)


def test_budgets_are_described_as_written() -> None:
    business = {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}
    short = {"nodes": "1", "schedule": "@daily", "duration": "90m"}
    assert waves.describe(budgeted(business, short, {"nodes": "10%"})) == [
        "0 during 0 9 * * 1-5 for 8h",
        "1 during @daily for 90m",
        "10%",
    ]


def test_a_pdb_allowing_fewer_evictions_than_a_wave_holds_stretches_that_wave() -> None:
    # Two nodes a wave; each holds three pods of web (PDB allows 2): the first wave evicts 6 pods two at a time,
    # three rounds, so it lasts two eviction rounds beyond the replacement. The second wave's node holds none.
    web = {"default/web": 3}
    found = waves.schedule(
        budgeted({"nodes": "2"}),
        3,
        total=10,
        now=MONDAY_10,
        replacement=STEP,
        pdb_pods=[web, web, {}],
        allowed={"default/web": 2},
        eviction=60.0,
    )
    assert [(w.nodes, w.duration) for w in found.waves] == [(2, STEP + 120.0), (1, STEP)]
    assert found.waves[0].held == (waves.Hold("default/web", 6, 2, 120.0),)
    assert found.waves[1].start == MONDAY_10 + STEP + 120.0
    assert found.finish == MONDAY_10 + 2 * STEP + 120.0


def test_a_pdb_with_room_for_the_whole_wave_or_none_adds_no_time() -> None:
    # room for all 4 pods: no wait; allowing none: the node is held outright (a hold on the node), not timed here.
    found = waves.schedule(
        budgeted({"nodes": "2"}),
        2,
        total=10,
        now=MONDAY_10,
        replacement=STEP,
        pdb_pods=[{"a/roomy": 2, "a/shut": 1}, {"a/roomy": 2}],
        allowed={"a/roomy": 4, "a/shut": 0},
    )
    assert [(w.nodes, w.duration, w.held) for w in found.waves] == [(2, STEP, ())]
