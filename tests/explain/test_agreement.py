"""`karpy explain` and the disruption controller agree, because they run one piece of code: on the same cluster,
the controller's next pass disrupts exactly the nodes explain called `disrupt` (same budget), and every
DisruptionBlocked or Unconsolidatable event the pass publishes is one of explain's reasons for that node.

Scenarios are ported from upstream's disruption suites (core: disruption/{emptiness,consolidation,drift}_test.go)
as data, on the in-memory world of tests/disruption."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.disruption import world as disruption_world

from karpy.api import labels
from karpy.disruption import blockers
from karpy.explain import run, verdicts

World = disruption_world.World
DNR = {labels.ANNOTATION_DO_NOT_DISRUPT: "true"}


def three_empty_budget_two(w: World) -> None:
    w.pool(budgets=[{"nodes": "2"}])
    for name in ("e1", "e2", "e3"):
        w.node(name)


def two_half_full(w: World) -> None:
    w.pool()
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="1")
    w.pod("pb", "b", cpu="1")


def big_node_small_pod(w: World) -> None:
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")


def many_underutilized(w: World) -> None:
    w.pool()
    for i in range(4):
        w.node(f"n{i}", itype="c8")
        w.pod(f"p{i}", f"n{i}", cpu="1")


def drifted_with_pods(w: World) -> None:
    w.pool(budgets=[{"nodes": "1"}])
    w.node("old", conditions=("Drifted",))
    w.pod("p", "old", cpu="1")
    w.node("older", conditions=("Drifted",))
    w.pod("q", "older", cpu="1")


def everything_blocked(w: World) -> None:
    w.pool()
    w.node("guarded")
    w.pod("web", "guarded", pod_labels={"app": "web"})
    w.pdb("web-pdb", {"app": "web"}, allowed=0)
    w.node("pinned")
    w.pod("batch", "pinned", annotations=DNR)
    w.node("annotated", node_annotations=DNR)
    w.node("young", conditions=())
    w.pod("y", "young", cpu="1")


def spot_without_spot_to_spot(w: World) -> None:
    w.pool(capacity_types=("spot",))
    w.node("s", itype="c8", capacity_type="spot")
    w.pod("p", "s", cpu="5")


def budget_blocks_underutilized(w: World) -> None:
    w.pool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}, {"nodes": "100%"}])
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="1")
    w.pod("pb", "b", cpu="1")
    w.node("empty")


SCENARIOS: dict[str, Callable[[World], None]] = {
    "emptiness takes what the budget allows": three_empty_budget_two,
    "single-node delete": two_half_full,
    "single-node replace": big_node_small_pod,
    "multi-node": many_underutilized,
    "drift, one per pass": drifted_with_pods,
    "nothing: every node blocked": everything_blocked,
    "spot-to-spot off": spot_without_spot_to_spot,
    "a budget blocks consolidation, not emptiness": budget_blocks_underutilized,
}


def explained(w: World) -> verdicts.Verdicts:
    w.sync()
    prepared = run.prepare(w.cluster, {"default": list(disruption_world.CATALOG)}, clock=w.clock, options=run.Options())
    found = run.explain(prepared).verdicts
    assert found is not None
    return found


@pytest.mark.parametrize("build", SCENARIOS.values(), ids=SCENARIOS.keys())
async def test_the_next_pass_disrupts_exactly_what_explain_said(build: Callable[[World], None]) -> None:
    w = World()
    build(w)
    found = explained(w)
    command = await w.reconcile(w.controller())
    said = {n.node.name for n in found.nodes if n.verdict is verdicts.Verdict.DISRUPT}
    if command is None:
        assert found.next_pass is None
        assert said == set()
        return
    assert found.next_pass is not None
    assert (found.next_pass.method, found.next_pass.decision) == (command.method, command.decision)
    assert said == {c.node.name for c in command.candidates}
    assert all(w.deleting(c.name) or labels.TAINT_DISRUPTED_KEY in w.taints(c.node.name) for c in command.candidates)


@pytest.mark.parametrize("build", SCENARIOS.values(), ids=SCENARIOS.keys())
async def test_every_event_of_the_pass_is_one_of_explains_reasons(build: Callable[[World], None]) -> None:
    w = World()
    build(w)
    found = explained(w)
    await w.reconcile(w.controller())
    reasons = {n.node.name: {r.message for r in n.reasons} for n in found.nodes}
    published = [
        (e.name, e.message)
        for e in w.recorder.events
        if e.kind == "Node" and e.reason in (blockers.DISRUPTION_BLOCKED, blockers.UNCONSOLIDATABLE)
    ]
    for name, message in published:
        assert message in reasons[name], f"{name}: the controller said {message!r}, explain {reasons[name]}"


async def test_blocked_nodes_say_what_blocks_them() -> None:
    w = World()
    everything_blocked(w)
    found = {n.node.name: n for n in explained(w).nodes}
    assert {name: n.verdict for name, n in found.items()} == dict.fromkeys(found, verdicts.Verdict.BLOCKED)
    kinds = {name: [r.kind for r in n.reasons] for name, n in found.items()}
    assert kinds == {
        "guarded": ["pdb"],
        "pinned": ["do-not-disrupt"],
        "annotated": ["do-not-disrupt"],
        "young": ["consolidate-after"],
    }
    assert (
        found["guarded"].reasons[0].message == "PodDisruptionBudget default/web-pdb prevents evicting pod default/web"
    )


async def test_nodes_the_pass_leaves_for_the_budget_wait_and_say_so() -> None:
    w = World()
    three_empty_budget_two(w)
    found = {n.node.name: n for n in explained(w).nodes}
    assert sorted(n.verdict for n in found.values()) == ["disrupt", "disrupt", "eligible"]
    (waiting,) = (n for n in found.values() if n.verdict is verdicts.Verdict.ELIGIBLE)
    assert (waiting.method, waiting.decision) == ("emptiness", "delete")
    assert [r.kind for r in waiting.reasons] == ["budget"]


async def test_a_budget_of_zero_blocks_with_the_budget_as_reason() -> None:
    w = World()
    budget_blocks_underutilized(w)
    found = {n.node.name: n for n in explained(w).nodes}
    assert found["empty"].verdict is verdicts.Verdict.DISRUPT
    for name in ("a", "b"):
        assert found[name].verdict is verdicts.Verdict.BLOCKED
        assert [r.kind for r in found[name].reasons] == ["budget"]


async def test_where_each_pod_would_go() -> None:
    w = World()
    two_half_full(w)
    found = explained(w)
    assert found.next_pass is not None
    (gone,) = found.next_pass.candidates
    (kept,) = {"a", "b"} - {gone.node.name}
    (move,) = found.next_moves
    assert (move.to, move.reason) == (f"node/{kept}", "")
    node = next(n for n in found.nodes if n.node.name == gone.node.name)
    assert node.simulated
    assert node.moves == found.next_moves


async def test_pods_that_fit_nowhere_are_named_with_why() -> None:
    w = World()
    w.pool(capacity_types=("on-demand",))
    w.node("full", itype="c2")
    w.pod("wide", "full", cpu="1", affinity=hostname_pin("full"))
    found = {n.node.name: n for n in explained(w).nodes}
    node = found["full"]
    assert node.verdict is verdicts.Verdict.BLOCKED
    assert [r.kind for r in node.reasons] == ["pods-do-not-fit"]
    (move,) = node.moves
    assert move.pod == "default/wide"
    assert move.to == ""
    assert move.reason


def hostname_pin(name: str) -> dict[str, object]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": labels.LABEL_HOSTNAME, "operator": "In", "values": [name]}]}
                ]
            }
        }
    }


async def test_the_survey_stops_at_its_simulation_limit_and_says_so() -> None:
    w = World()
    budget_blocks_underutilized(w)  # the pass takes the empty node: no simulation of its own
    w.sync()
    catalog = {"default": list(disruption_world.CATALOG)}
    prepared = run.prepare(w.cluster, catalog, clock=w.clock, options=run.Options(simulations=0))
    found = run.explain(prepared).verdicts
    assert found is not None
    assert {n.node.name: n.verdict for n in found.nodes} == {
        "a": verdicts.Verdict.BLOCKED,  # its budget says no before any simulation
        "b": verdicts.Verdict.BLOCKED,
        "empty": verdicts.Verdict.DISRUPT,
    }
    w.pool()  # budgets back: both need a simulation now, and none is allowed
    w.sync()
    prepared = run.prepare(w.cluster, catalog, clock=w.clock, options=run.Options(simulations=0))
    limited = run.explain(prepared).verdicts
    assert limited is not None
    left = {n.node.name: n.verdict for n in limited.nodes if n.verdict is not verdicts.Verdict.DISRUPT}
    assert left == {"a": verdicts.Verdict.NOT_SIMULATED, "b": verdicts.Verdict.NOT_SIMULATED}
    focused = run.prepare(w.cluster, catalog, clock=w.clock, options=run.Options(simulations=0, node="a"))
    one = run.explain(focused).verdicts
    assert one is not None
    assert [(n.node.name, n.simulated) for n in one.nodes] == [("a", True)]
