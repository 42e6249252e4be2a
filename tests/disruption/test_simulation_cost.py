"""What a disruption pass computes, not only what it decides: a simulation whose verdict first-fit has settled (a
candidate pod fits nowhere or only on a node not yet initialized; a consolidation that needs two new nodes or more)
skips the scheduler's cost post-pass, and decides as the full solve does."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from tests.disruption import world as disruption_world

from karpy.disruption import simulation
from karpy.scheduling import results, scheduler
from karpy.scheduling.optimizer import optimize


def _count_improves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Any] = optimize.improve

    def counted(claims: Any, **kwargs: Any) -> Any:
        calls.append(len(claims))
        return real(claims, **kwargs)

    monkeypatch.setattr(optimize, "improve", counted)
    return calls


async def _simulate_the_one_candidate(w: disruption_world.World) -> simulation.Simulation:
    """The simulation of removing the pass's only graceful candidate."""
    ctrl = w.controller()
    w.sync()
    ctx = await ctrl.context()
    (candidate,) = ctx.graceful
    return ctx.simulate([candidate])


def _solve_reading_every_claim(inp: scheduler.SchedulingInput) -> results.Results:
    return scheduler.solve(dataclasses.replace(inp, one_claim_at_most=False))


async def test_a_simulation_settled_by_an_uninitialized_node_skips_the_cost_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a scale-out under way: "new" is still initializing with room, pods wait for capacity not launched yet
    w = disruption_world.World()
    w.pool()
    w.node("new", itype="c8")
    w.node("b", itype="c4")
    w.pod("pb", "b", cpu="500m")
    for i in range(6):
        w.pending_pod(f"pending-{i}", cpu="3")
    w.uninitialize("new")
    calls = _count_improves(monkeypatch)
    sim = await _simulate_the_one_candidate(w)
    assert sim.unschedulable == {"default/pb": "would schedule against uninitialized nodeclaim/new, node/new"}
    assert sim.replacements  # the pending pods still get first-fit's claims
    assert calls == []


async def test_a_simulation_whose_pods_all_fit_still_runs_the_cost_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("b", itype="c4")
    w.pod("pb", "b", cpu="500m")
    w.pending_pod("pending", cpu="3")
    calls = _count_improves(monkeypatch)
    sim = await _simulate_the_one_candidate(w)
    assert sim.all_scheduled
    assert calls == [len(sim.replacements)]  # the claims it reads may be the post-pass's


def _waiting_for_capacity(pending: int) -> disruption_world.World:
    """A scale-out whose new capacity is not launched yet: `pending` pods of 3 CPUs wait, b could go."""
    w = disruption_world.World()
    w.pool()
    w.node("a", itype="c4")
    w.node("b", itype="c4")
    w.pod("pa", "a", cpu="1")
    w.pod("pb", "b", cpu="1")
    for i in range(pending):
        w.pending_pod(f"pending-{i}", cpu="3")
    return w


async def test_a_consolidation_needing_several_new_nodes_skips_the_cost_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # no c8 holds the pending pods' 12 CPUs: every plan needs two nodes or more, and consolidation acts on one at most
    # (upstream consolidation.go "Can't remove without creating N candidates"); the decision is the full solve's
    calls = _count_improves(monkeypatch)
    w = _waiting_for_capacity(pending=4)
    assert await w.reconcile(w.controller()) is None
    assert calls == []
    skipped = {e.message for e in w.recorder.events if e.reason == "Unconsolidatable"}
    full = _waiting_for_capacity(pending=4)
    assert await full.reconcile(full.controller(solver=_solve_reading_every_claim)) is None
    assert calls  # the full solve ran the cost pass, and decided the same, for the same reason
    assert skipped == {e.message for e in full.recorder.events if e.reason == "Unconsolidatable"}
    assert skipped == {"Can't remove without creating 2 candidates"}


async def test_drift_reads_every_claim_so_its_simulation_keeps_the_cost_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    w = _waiting_for_capacity(pending=4)
    calls = _count_improves(monkeypatch)
    ctrl = w.controller()
    w.sync()
    ctx = await ctrl.context()
    b = next(c for c in ctx.eventual if c.name == "b")
    sim = ctx.simulate([b], consolidation=False)
    assert len(sim.replacements) >= 2
    assert calls == [len(sim.replacements)]
