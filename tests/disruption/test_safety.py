"""What disruption must never destroy, end to end (real Cluster, fake provider, in-memory API): nodes whose pods are
protected by do-not-disrupt (either form) or a PodDisruptionBudget, nodes annotated do-not-disrupt, and anything a
budget of zero holds. Drift alone may pass pod blockers, and only when the claim has a terminationGracePeriod
(core: disruption/types.go NewCandidate, EventualDisruptionClass)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool
from karpy.disruption import consolidation

Reason = nodepool.DisruptionReason
DND = labels.ANNOTATION_DO_NOT_DISRUPT


def _do_not_disrupt(w: disruption_world.World) -> None:
    w.pod("guarded", "a", annotations={DND: "true"})


def _do_not_disrupt_for_an_hour(w: disruption_world.World) -> None:
    w.pod("guarded", "a", annotations={DND: "1h"}, started=w.clock.now() - 60)


def _pdb_allows_nothing(w: disruption_world.World) -> None:
    w.pod("guarded", "a", pod_labels={"app": "db"})
    w.pdb("db", {"app": "db"}, allowed=0)


BLOCKERS = pytest.mark.parametrize(
    "block", [_do_not_disrupt, _do_not_disrupt_for_an_hour, _pdb_allows_nothing], ids=["dnd", "dnd-1h", "pdb"]
)


def _big_neighbour(w: disruption_world.World) -> None:
    """Node "b": room for a small pod, but its own pod fits nowhere cheaper, so only "a" could be consolidated."""
    w.node("b", itype="c8")
    w.pod("big", "b", cpu="6")


def _untouched(w: disruption_world.World, *names: str) -> bool:
    return all(not w.deleting(n) and labels.TAINT_DISRUPTED_KEY not in w.taints(n) for n in names)


@BLOCKERS
async def test_drift_leaves_a_node_with_blocking_pods_without_a_termination_grace_period(
    block: Callable[[disruption_world.World], None],
) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",))
    block(w)
    assert await w.reconcile(w.controller()) is None
    assert _untouched(w, "a")


async def _drift_with_a_grace_period(block: Callable[[disruption_world.World], None]) -> consolidation.Command | None:
    """One pass over drifted node "a" (terminationGracePeriod 1h) with `block` applied."""
    w = disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",), tgp="1h")
    block(w)
    return await w.reconcile(w.controller())


@BLOCKERS
async def test_drift_passes_blocking_pods_when_the_claim_has_a_termination_grace_period(
    block: Callable[[disruption_world.World], None],
) -> None:
    cmd = await _drift_with_a_grace_period(block)
    assert cmd is not None
    assert cmd.reason == Reason.DRIFTED
    assert [c.name for c in cmd.candidates] == ["a"]


def _pdb_never_allows(w: disruption_world.World) -> None:
    w.pod("guarded", "a", pod_labels={"app": "db"})
    w.pdb("db", {"app": "db"}, allowed=0, maxUnavailable=0)


@pytest.mark.parametrize(
    ("block", "replaced"),
    [
        (_do_not_disrupt, False),
        (_do_not_disrupt_for_an_hour, False),
        (_pdb_never_allows, False),
        (_pdb_allows_nothing, True),
    ],
    ids=["dnd", "dnd-1h", "pdb-max-unavailable-0", "pdb-at-its-minimum"],
)
async def test_drift_buys_no_replacement_for_pods_that_cannot_be_evicted(
    block: Callable[[disruption_world.World], None], replaced: bool
) -> None:
    """core: disruption/drift_test.go "should not create replacements for drifted nodes that have pods with the
    karpenter.sh/do-not-disrupt annotation when the NodePool's TerminationGracePeriod is not nil" and "... with the
    blocking PDBs ..." (#2033): such a pod stays until its grace period ends, so a replacement would stand empty. A
    PDB merely at its minimum now lets the eviction through once the replacement is Ready: that pod is replaced."""
    cmd = await _drift_with_a_grace_period(block)
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.DRIFTED, ["a"])
    assert bool(cmd.replacements) is replaced
    assert [p.key for p in cmd.candidates[0].reschedulable_pods] == (["default/guarded"] if replaced else [])


@BLOCKERS
async def test_consolidation_never_passes_blocking_pods_even_with_a_termination_grace_period(
    block: Callable[[disruption_world.World], None],
) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a", tgp="1h")
    _big_neighbour(w)
    block(w)  # its one small pod would fit on "b": without the blocker, "a" goes
    assert await w.reconcile(w.controller()) is None
    assert _untouched(w, "a", "b")


async def test_a_do_not_disrupt_duration_protects_only_until_it_runs_out() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    _big_neighbour(w)
    w.pod("guarded", "a", annotations={DND: "10m"}, started=w.clock.now())
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None
    await w.clock.run_for(10 * 60)
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert [c.name for c in cmd.candidates] == ["a"]


@pytest.mark.parametrize("tgp", [None, "1h"])
async def test_a_node_annotated_do_not_disrupt_is_never_a_candidate(tgp: str | None) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",), node_annotations={DND: "true"}, tgp=tgp)
    w.node("b", node_annotations={DND: "true"})  # empty
    assert await w.reconcile(w.controller()) is None
    assert w.kube.writes == []


@pytest.mark.parametrize(
    "budgets",
    [
        [{"nodes": "0"}],
        [{"nodes": "0%"}],
        [{"nodes": "0", "reasons": ["Drifted", "Empty", "Underutilized"]}, {"nodes": "100%"}],
    ],
    ids=["zero", "zero-percent", "zero-for-every-reason"],
)
async def test_a_budget_of_zero_holds_every_node(budgets: list[dict[str, object]]) -> None:
    w = disruption_world.World()
    w.pool(budgets=budgets)
    w.node("drifted", conditions=("Drifted",))
    w.pod("p", "drifted")
    w.node("empty")
    w.node("underused")
    w.pod("q", "underused")
    assert await w.reconcile(w.controller()) is None
    assert w.kube.writes == []


async def test_a_zero_budget_for_one_reason_holds_only_that_reason() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "100%"}])
    w.node("drifted", conditions=("Drifted",))
    w.pod("p", "drifted", cpu="3")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None  # drift may not go; nothing else to do
    w.node("empty")
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.EMPTY, ["empty"])
    assert _untouched(w, "drifted")


@pytest.mark.parametrize("leaving", ["not-ready", "deleting"])
async def test_nodes_already_leaving_use_up_the_budget(leaving: str) -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "1"}])
    w.node("busy", ready=leaving != "not-ready")
    w.pod("p", "busy", cpu="3")
    if leaving == "deleting":
        w.kube.objects[("nodeclaims", "", "busy")]["metadata"]["deletionTimestamp"] = disruption_world.ts(w.clock.now())
    w.node("empty")
    assert await w.reconcile(w.controller()) is None
    assert _untouched(w, "empty")


@BLOCKERS
async def test_a_blocker_appearing_during_the_validation_wait_stops_a_consolidation_even_with_a_tgp(
    block: Callable[[disruption_world.World], None],
) -> None:
    """The re-check after the 15 s wait reads the *graceful* candidates for consolidation: a pod protected by
    do-not-disrupt or a PDB allowing none that lands meanwhile holds the node, terminationGracePeriod or not (core:
    disruption/validation.go validateCandidates uses the command's own disruption class)."""
    w = disruption_world.World()
    w.pool()
    w.node("a", tgp="1h")
    _big_neighbour(w)
    w.pod("small", "a", cpu="500m")  # fits on "b" with a 1-cpu pod more: only the blocker can stop it
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    block(w)  # the blocked pod lands on "a" after the decision, before the re-check
    w.sync()
    await w.clock.run_for(11)
    assert (await task).command is None
    assert _untouched(w, "a", "b")


async def test_without_a_blocker_the_same_consolidation_goes_ahead() -> None:
    """The control of the test above: the same cluster, and an unprotected pod landing meanwhile."""
    w = disruption_world.World()
    w.pool()
    w.node("a", tgp="1h")
    _big_neighbour(w)
    w.pod("small", "a", cpu="500m")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("guarded", "a")
    w.sync()
    await w.clock.run_for(11)
    cmd = (await task).command
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.UNDERUTILIZED, ["a"])
