"""A command that fails validation is a method that did nothing: the methods after it are asked in the same pass
(core: disruption/controller.go `Reconcile`, which goes on to the next method whenever `disrupt` did not succeed,
and a validation failure returns no command from `ComputeCommands`)."""

from __future__ import annotations

import asyncio

from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool
from karpy.disruption import controller as disruption_controller
from karpy.disruption import methods
from karpy.kube import resources

Reason = nodepool.DisruptionReason


async def test_single_node_consolidation_follows_a_multi_node_command_that_failed_validation_in_the_same_pass() -> None:
    """Ported from upstream consolidation_test.go "should continue to single nodeclaim consolidation when
    multi-nodeclaim consolidation fails validation after the node ttl": three nodes with a pod each; multi-node
    consolidation would replace all three with one smaller node, but during its validation wait two more pods land on
    the first two nodes, so the re-simulation needs as big a node as theirs. The same pass then asks single-node
    consolidation, which deletes the third node (its pod fits beside the others) after a validation of its own."""
    w = disruption_world.World()
    w.pool()
    for i in range(3):
        w.node(f"n{i}", itype="c8")
        w.pod(f"p{i}", f"n{i}", cpu="1")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)  # multi-node consolidation's command is waiting out its validation delay
    w.pod("x0", "n0", cpu="1")
    w.pod("x1", "n1", cpu="1")
    w.sync()
    await w.clock.run_for(11)  # that validation fails; the same pass asks single-node consolidation
    assert not task.done()
    assert w.kube.writes == []  # nothing tainted, launched or deleted for the rejected command
    rejected = w.recorder.reasons("n0")
    assert "ConsolidationRejected" in rejected
    await w.clock.run_for(15)  # single-node consolidation's own validation delay, then it acts
    command = (await task).command
    assert command is not None
    assert command.method == methods.SingleNodeConsolidation.name
    assert (command.reason, command.decision) == (Reason.UNDERUTILIZED, "delete")
    assert [c.name for c in command.candidates] == ["n2"]
    assert labels.TAINT_DISRUPTED_KEY in w.taints("n2")
    assert all(labels.TAINT_DISRUPTED_KEY not in w.taints(n) for n in ("n0", "n1"))
    await ctrl.queue.reconcile()  # a delete: no replacement to wait for
    assert w.deleting("n2")
    assert not w.deleting("n0")
    assert not w.deleting("n1")


async def _rejected_empty_node(*, launch_meanwhile: bool) -> disruption_controller.Pass:
    """A pass whose Emptiness command for n0 is rejected after its validation wait (n0 gained a do-not-disrupt pod);
    with `launch_meanwhile`, a NodeClaim with no providerID yet appears in that wait (the cluster goes unsynced)."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("late", "n0", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    if launch_meanwhile:
        w.node("launching")
        launched = w.kube.obj(resources.NODECLAIMS, "launching")
        assert launched is not None
        w.kube.put(resources.NODECLAIMS, {**launched, "status": {"conditions": launched["status"]["conditions"]}})
    w.sync()
    assert w.cluster.synced_for_decisions() is not launch_meanwhile
    await w.clock.run_for(11)
    assert task.done()
    assert not w.deleting("n0")
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("n0")
    return await task


async def test_a_rejected_last_method_ends_the_pass_with_nothing_done() -> None:
    """The methods after a rejected command's own are asked; when there are none, the pass did nothing (the loop
    polls again): ported from upstream consolidation_test.go "should not consolidate if the action becomes invalid
    during the node TTL wait", where the node gains a do-not-disrupt pod, so no later method has a command either."""
    done = await _rejected_empty_node(launch_meanwhile=False)
    assert done == disruption_controller.Pass(command=None, requeue_after=disruption_controller.POLL)


async def test_a_pass_whose_cluster_went_unsynced_after_a_rejection_looks_again_after_a_second() -> None:
    """upstream disruption/controller.go `Reconcile` requeues after one second whenever `cluster.Synced` is false;
    a pass that stops early because a launch went in flight during its validation wait is no pass that found nothing
    to do, so it must not wait the 10 s pollingPeriod either."""
    done = await _rejected_empty_node(launch_meanwhile=True)
    assert done == disruption_controller.Pass(command=None, requeue_after=disruption_controller.SYNC_POLL)


async def test_an_emptiness_command_goes_on_with_the_nodes_still_empty_after_its_validation() -> None:
    """Ported from upstream consolidation_test.go "does not delete nodes with pod churn, deletes nodes without pod
    churn": two empty nodes; a pod lands on one during the validation wait; the command deletes the other alone."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.node("n1")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("late", "n0", cpu="3")  # the scheduler placed a pod on it meanwhile
    w.sync()
    await w.clock.run_for(11)
    assert task.done()
    command = (await task).command
    assert command is not None
    assert (command.method, command.reason, command.decision) == ("emptiness", Reason.EMPTY, "delete")
    assert [c.name for c in command.candidates] == ["n1"]
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("n0")
    await ctrl.queue.reconcile()
    assert w.deleting("n1")
    assert not w.deleting("n0")


async def test_an_emptiness_command_keeps_only_what_the_budget_still_allows() -> None:
    """upstream disruption/validation.go `EmptinessValidator.validateCandidates`: after the wait, the candidates are
    taken in order while their pool's budget lasts; one that a new budget no longer allows is left out."""
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "3"}])
    for i in range(3):
        w.node(f"n{i}")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pool(budgets=[{"nodes": "2"}])
    w.sync()
    await w.clock.run_for(11)
    command = (await task).command
    assert command is not None
    assert len(command.candidates) == 2


async def test_a_replacement_that_now_needs_a_bigger_node_fails_validation() -> None:
    """Ported from upstream consolidation_test.go "should not consolidate if the action picks different instance
    types after the node TTL wait": a c8 with a 1-CPU pod would become a c2; a second pod lands during the wait, so
    c2 no longer fits (upstream: the command's types must be a subset of what the re-simulation fits)."""
    w = disruption_world.World()
    w.pool()
    w.node("n0", itype="c8")
    w.pod("p0", "n0", cpu="1")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("p1", "n0", cpu="2")
    w.sync()
    await w.clock.run_for(11)  # multi-node has no command for one node; single-node's is rejected, and it is last
    assert task.done()
    assert (await task).command is None
    assert "ConsolidationRejected" in w.recorder.reasons("n0")
    assert w.kube.writes == []


async def test_a_replacement_that_now_fits_more_instance_types_still_holds() -> None:
    """The other side of upstream's subset check: a pod leaving the candidate during the wait lets the
    re-simulation fit more types than the command chose; the command's own types still fit, so it holds (karpy
    once asked the reverse, and dropped such commands)."""
    w = disruption_world.World()
    w.pool()
    w.node("n0", itype="c8")
    w.pod("p0", "n0", cpu="2")
    w.pod("p1", "n0", cpu="1")
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    del w.kube.objects[("pods", "default", "p0")]  # scaled in: a c2 would do now
    w.sync()
    await w.clock.run_for(11)
    assert task.done()
    command = (await task).command
    assert command is not None
    assert command.decision == "replace"
    assert {t.name for t in command.replacements[0].instance_type_options} == {"c4"}
