"""What a disruption pass computes, not only what it decides: a simulation whose verdict first-fit has settled (a
candidate pod fits nowhere or only on a node not yet initialized; a consolidation that needs two new nodes or more)
or one that first-fit placed on at most one new claim skips the scheduler's cost post-pass, and decides as the full
solve does or better: re-packing first-fit's one claim as several cheaper ones would only block the consolidation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from tests.disruption import world as disruption_world

from karpy.api import labels
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


async def test_two_first_fit_claims_one_type_could_hold_still_run_the_cost_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the post-pass may merge first-fit's claims into the one a consolidation acts on; here the pods' own
    # anti-affinity keeps them apart, so both plans need two
    w = disruption_world.World()
    w.pool()
    w.node("b", itype="c8")
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "apart"}}}
            ]
        }
    }
    for i in (1, 2):
        w.pod(f"pb-{i}", "b", cpu="1500m", pod_labels={"app": "apart"}, affinity=apart)
    calls = _count_improves(monkeypatch)
    sim = await _simulate_the_one_candidate(w)
    assert sim.all_scheduled
    assert calls == [2]
    assert len(sim.replacements) == 2


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


def _one_roomy_node() -> disruption_world.World:
    """b, a c8, holds two pods of 1.5 CPUs: one c4 holds both for a third of b's price, and two c2s cost half a c4."""
    w = disruption_world.World(
        catalog=(
            disruption_world.instance_type("c2", 2, 0.05),
            disruption_world.instance_type("c4", 4, 0.20),
            disruption_world.instance_type("c8", 8, 0.60),
        )
    )
    w.pool()
    w.node("b", itype="c8")
    w.pod("pb-1", "b", cpu="1500m")
    w.pod("pb-2", "b", cpu="1500m")
    return w


async def test_a_consolidation_first_fit_places_on_one_claim_replaces_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    # First-fit puts both pods on one new claim, the only shape a consolidation acts on (core
    # disruption/consolidation.go computeConsolidation): re-packing it as two cheaper claims would turn a saving
    # into "Can't remove without creating 2 candidates", so the cost pass is not run on it.
    calls = _count_improves(monkeypatch)
    w = _one_roomy_node()
    command = await w.reconcile(w.controller())
    assert calls == []
    assert command is not None
    (replacement,) = command.replacements
    assert {t.name for t in replacement.instance_type_options} == {"c4"}  # cheaper than b's c8 and holds both pods
