"""Each method end to end: real Cluster + fake provider + in-memory API, virtual time through validation."""

from __future__ import annotations

import asyncio

import pytest
from tests.disruption import world as disruption_world

from karpy import settings as karpy_settings
from karpy.api import labels, nodepool, quantity
from karpy.disruption import controller as disruption_controller
from karpy.kube import resources
from karpy.scheduling import results, scheduler

Reason = nodepool.DisruptionReason


async def test_empty_nodes_are_deleted_within_the_budget() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "2"}])
    for i in range(4):
        w.node(f"n{i}")
    w.pod("busy", "n3")
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.reason == Reason.EMPTY
    assert cmd.decision == "delete"
    assert len(cmd.candidates) == 2  # three empty nodes, a budget of two
    chosen = [c.name for c in cmd.candidates]
    assert "n3" not in chosen
    for name in chosen:
        assert labels.TAINT_DISRUPTED_KEY in w.taints(name)
        assert "DisruptionReason" in w.claim_conditions(name)
    await ctrl.queue.reconcile()  # no replacements to wait for
    assert all(w.deleting(n) for n in chosen)
    assert not ctrl.queue.items


async def test_drifted_node_is_replaced_respecting_a_budget_of_one() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "1"}])
    w.node("a", conditions=("Drifted",))
    w.node("b", conditions=("Drifted",))
    w.pod("p1", "a", cpu="3")
    w.pod("p2", "b", cpu="3")
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.reason == Reason.DRIFTED
    assert [c.name for c in cmd.candidates] == ["a"]
    assert len(cmd.replacements) == 1
    created = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] not in ("a", "b")]
    assert len(created) == 1
    # "a" is now marked for deletion: the budget of one is used up, so "b" must wait
    assert await w.reconcile(ctrl) is None
    # replacement initializes -> the candidate is deleted
    replacement = created[0]["metadata"]["name"]
    w.kube.objects[("nodeclaims", "", replacement)]["status"] = {"conditions": [disruption_world.cond("Initialized")]}
    await ctrl.queue.reconcile()
    assert w.deleting("a")
    assert not w.deleting("b")
    assert "DisruptionTerminating" in w.recorder.reasons()


async def test_no_second_decision_while_a_replacement_is_still_launching() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "100%"}])
    w.node("a", conditions=("Drifted",))
    w.node("b", conditions=("Drifted",))
    w.pod("p1", "a", cpu="3")
    w.pod("p2", "b", cpu="3")
    ctrl = w.controller()
    first = await w.reconcile(ctrl)
    assert first is not None
    assert len(first.replacements) == 1
    # The replacement has no providerID yet: it holds no capacity, so a simulation now would buy "a"'s pods a
    # second node beside it (upstream's Synced() is false while a launch is in flight).
    assert await w.reconcile(ctrl) is None
    (replacement,) = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] not in ("a", "b")]
    c4 = w.catalog["c4"]
    amounts = {k: quantity.format_resource(k, v) for k, v in c4.allocatable.items()}
    replacement["status"] = {"providerID": "fake:///test-zone-1/i-new", "capacity": amounts, "allocatable": amounts}
    second = await w.reconcile(ctrl)
    assert second is not None
    assert [c.name for c in second.candidates] == ["b"]
    assert len(second.replacements) == 1  # only "b"'s pods: "a"'s are counted on the launched replacement
    assert len([o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] not in ("a", "b")]) == 2


async def test_consolidation_deletes_a_node_whose_pods_fit_elsewhere() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="1")
    w.pod("pb", "b", cpu="1")
    cmd = await w.reconcile(w.controller())
    # both into one new c4 would not be cheaper than a c4 they already run on (same-type rule), and a c2 is too small;
    # one node's pod fits on the other: a single-node delete saving a c4
    assert cmd is not None
    assert cmd.reason == Reason.UNDERUTILIZED
    assert cmd.decision == "delete"
    assert cmd.method == "single-node-consolidation"
    assert len(cmd.candidates) == 1
    assert cmd.savings == 0.20


async def test_consolidation_does_not_delete_a_node_whose_pods_would_take_a_pending_pods_room() -> None:
    # pa (2 CPU) fits in b's free room, but so does the pending pp (1.5 CPU), not both: deleting a would leave pp
    # needing a new node, so "nothing new is needed" is false and a plain delete must not be decided.
    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="2")
    w.pod("pb", "b", cpu="1500m")
    w.pending_pod("pp", cpu="1500m")
    cmd = await w.reconcile(w.controller())
    assert cmd is None or cmd.decision != "delete"


async def test_multi_node_consolidation_merges_two_nodes_into_one_cheaper() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.node("small", itype="c2")
    w.pod("p-big", "big", cpu="2")
    w.pod("p-small", "small", cpu="1")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert cmd.method == "multi-node-consolidation"
    assert cmd.decision == "replace"
    assert {c.name for c in cmd.candidates} == {"big", "small"}
    # 3 cpu + overhead: c4 or c8; c8 is excluded since a c8 is being removed at that price
    assert [t.name for t in cmd.replacements[0].instance_type_options] == ["c4"]
    assert round(cmd.savings, 6) == 0.30


async def test_consolidation_replaces_with_a_cheaper_single_node() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert cmd.decision == "replace"
    options = {t.name for t in cmd.replacements[0].instance_type_options}
    assert "c8" not in options
    assert options <= {"c2", "c4"}
    assert cmd.savings > 0


async def test_spot_node_is_not_replaced_without_spot_to_spot() -> None:
    w = disruption_world.World()
    w.pool(capacity_types=("spot",))
    w.node("s", itype="c8", capacity_type="spot")
    w.pod("p", "s", cpu="1")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None
    unconsolidatable = [e for e in w.recorder.events if e.reason == "Unconsolidatable"]
    assert any("SpotToSpotConsolidation is disabled" in e.message for e in unconsolidatable)


async def test_on_demand_replacement_is_pinned_to_spot_when_either_is_allowed() -> None:
    w = disruption_world.World()
    w.pool(capacity_types=("spot", "on-demand"))
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert cmd.decision == "replace"
    ct = cmd.replacements[0].requirements.get(labels.LABEL_CAPACITY_TYPE)
    assert ct is not None
    assert ct.values() == frozenset({"spot"})


async def test_do_not_disrupt_blocks_pod_and_node_forms() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("pinned", node_annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    w.node("guarded")
    w.pod("keep", "guarded", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    assert await w.reconcile(w.controller()) is None
    assert w.kube.writes == []


async def test_validation_rejects_when_a_pod_lands_during_the_delay() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0", itype="c2")  # the cheapest type: once it has a pod, no later method of the pass has a command
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("late", "n0")  # the scheduler placed a pod on the node meanwhile
    w.sync()
    await w.clock.run_for(11)
    assert (await task).command is None
    assert not w.deleting("n0")
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("n0")


async def test_an_empty_node_is_deleted_once_its_nomination_runs_out_with_nothing_else_happening() -> None:
    """Emptiness remembers "nothing to do" per cluster state; a nomination running out is a change of that state,
    or a quiet cluster would keep a node it no longer needs until some unrelated watch event came."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.cluster.nominate("n0", w.clock.now() + 20)  # the provisioner counted on it for pods that went away since
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None
    await w.clock.run_for(20)
    cmd = await w.reconcile(ctrl, sync=False)  # no watch event in between: only time passed
    assert cmd is not None
    assert cmd.reason == Reason.EMPTY
    assert [c.name for c in cmd.candidates] == ["n0"]


async def test_an_empty_node_goes_once_a_blocking_budget_window_closes_with_nothing_else_happening() -> None:
    """A budget's schedule window closing is no watch event; upstream's five-minute forced revalidation is what ends
    the "nothing to do" memo. The world's clock starts at 23:13:20 UTC, inside the window 23:13–23:23."""
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "0", "schedule": "13 23 * * *", "duration": "10m"}, {"nodes": "100%"}])
    w.node("n0")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None  # budget of zero: nothing may go
    await w.clock.run_for(10 * 60 - 20 - 16 + 1)  # just past 23:23:00, the window's end
    cmd = await w.reconcile(ctrl, sync=False)  # no watch event in between: only time passed
    assert cmd is not None
    assert cmd.reason == Reason.EMPTY
    assert [c.name for c in cmd.candidates] == ["n0"]


async def test_dry_run_decides_but_writes_nothing() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    cmd = await w.reconcile(w.controller(dry_run=True))
    assert cmd is not None
    assert cmd.reason == Reason.EMPTY
    assert w.kube.writes == []


async def test_not_synced_does_nothing_and_looks_again_after_a_second() -> None:
    """upstream disruption/controller.go `Reconcile`: not synced, RequeueAfter one second."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    ctrl = w.controller()
    not_synced = disruption_controller.Pass(command=None, requeue_after=disruption_controller.SYNC_POLL)
    assert await ctrl.reconcile() == not_synced  # nothing listed yet
    assert w.kube.writes == []


async def test_a_pass_that_acted_asks_for_the_next_at_once_and_one_that_did_not_after_the_poll() -> None:
    """upstream disruption/controller.go `Reconcile`: RequeueImmediately after a command, else pollingPeriod."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")  # empty: Emptiness deletes it
    ctrl = w.controller(poll=7.0)
    w.sync()
    acted = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(16)  # the validation delay
    done = await acted
    assert (done.command is not None, done.requeue_after) == (True, 0.0)
    idle = asyncio.create_task(ctrl.reconcile())  # n0 is in the queue now: nothing else to do
    await w.clock.run_for(16)
    assert await idle == disruption_controller.Pass(command=None, requeue_after=7.0)


async def test_failed_replacement_untaints_and_drops_the_command() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.decision == "replace"
    assert labels.TAINT_DISRUPTED_KEY in w.taints("big")
    replacement = ctrl.queue.items[0].replacements[0]
    del w.kube.objects[("nodeclaims", "", replacement)]  # e.g. ICE: the lifecycle controller deleted it
    await ctrl.queue.reconcile()
    assert not ctrl.queue.items
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("big")
    assert "DisruptionReason" not in w.claim_conditions("big")
    assert not w.deleting("big")
    w.sync()
    assert not any(n.marked_for_deletion for n in w.cluster.state_nodes())


async def test_replacement_timeout_undoes_the_command() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is not None
    w.clock.advance(601)  # retry window: clamp(80 ms × 1, 10 min, 1 h) = 10 min
    await ctrl.queue.reconcile()
    assert not ctrl.queue.items
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("big")


async def test_stale_marks_are_stripped_after_a_restart() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0", conditions=("DisruptionReason",))
    w.pod("p", "n0")
    node = w.kube.objects[("nodes", "", "n0")]
    node["spec"]["taints"] = [{"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}]
    w.sync()
    ctrl = w.controller()  # a fresh process: empty queue
    await w.reconcile(ctrl)
    assert labels.TAINT_DISRUPTED_KEY not in w.taints("n0")
    assert "DisruptionReason" not in w.claim_conditions("n0")


async def test_unconsolidatable_is_published_on_the_node_and_the_nodeclaim() -> None:
    w = disruption_world.World()
    w.pool(capacity_types=("spot",))
    w.node("s", itype="c8", capacity_type="spot")
    w.pod("p", "s", cpu="1")
    assert await w.reconcile(w.controller()) is None
    about = {(e.kind, e.name) for e in w.recorder.events if e.reason == "Unconsolidatable"}
    assert about == {("Node", "s"), ("NodeClaim", "s")}
    messages = {e.message for e in w.recorder.events if e.reason == "Unconsolidatable"}
    assert len(messages) == 1  # the same reason on both


PREFER_APART = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": labels.LABEL_HOSTNAME,
                },
            }
        ]
    }
}


IGNORE_BEST_EFFORT = karpy_settings.SchedulingSettings(
    preference_policy=karpy_settings.PreferencePolicy.IGNORE,
    min_values_policy=karpy_settings.MinValuesPolicy.BEST_EFFORT,
)


@pytest.mark.parametrize(
    ("settings", "policies", "decision"),
    [
        # Respect: pa keeps away from pb's node while a new (cheaper) node can take it: replace
        ({}, ("Respect", "Strict"), "replace"),
        # Ignore, as the provisioner would with PREFERENCE_POLICY=Ignore: pa simply moves next to pb
        ({"scheduling": IGNORE_BEST_EFFORT}, ("Ignore", "BestEffort"), "delete"),
    ],
)
async def test_simulations_schedule_with_the_provisioners_policies(
    settings: dict[str, karpy_settings.SchedulingSettings], policies: tuple[str, str], decision: str
) -> None:
    seen: set[tuple[str, str]] = set()

    def solver(inp: scheduler.SchedulingInput) -> results.Results:
        seen.add((inp.options.preference_policy, inp.options.min_values_policy))
        return scheduler.solve(inp)

    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="1", pod_labels={"app": "x"}, affinity=PREFER_APART)
    w.pod("pb", "b", cpu="1", pod_labels={"app": "x"})
    cmd = await w.reconcile(w.controller(solver=solver, **settings))
    assert seen == {policies}
    assert cmd is not None
    assert [c.name for c in cmd.candidates] == ["a"]
    assert cmd.decision == decision


async def test_candidates_pods_stay_off_a_node_inside_its_consolidate_after_window() -> None:
    w = disruption_world.World()
    w.pool(after="10m")
    w.node("a", itype="c2")
    w.node("b", itype="c2", conditions=(), last_pod_event=w.clock.now() - 60)  # a pod landed a minute ago
    w.pod("pa", "a", cpu="500m")
    w.pod("pb", "b", cpu="500m")
    ctrl = w.controller()
    # pa would fit on b, but b is still settling: a would need a new c2, which is no cheaper than a
    assert await w.reconcile(ctrl) is None
    assert not w.kube.writes
    # b's window ends; the conditions controller marks it Consolidatable (a cluster change: methods look again)
    w.clock.advance(600)
    claim = w.kube.objects[("nodeclaims", "", "b")]
    claim["status"]["conditions"].append(disruption_world.cond("Consolidatable", at=w.clock.now()))
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.decision == "delete"
    assert [c.name for c in cmd.candidates] == ["a"]


async def test_pending_pods_and_drift_may_still_use_a_settling_node() -> None:
    w = disruption_world.World()
    w.pool(after="10m")
    w.node("a", itype="c2")
    w.node("b", itype="c2", conditions=(), last_pod_event=w.clock.now() - 60)
    w.pod("pa", "a", cpu="500m")
    w.pending_pod("pp", cpu="500m")
    ctrl = w.controller()
    w.sync()
    ctx = await ctrl.context()
    (a,) = [c for c in ctx.graceful if c.name == "a"]
    consolidating = ctx.simulate([a])
    (replacement,) = consolidating.replacements
    assert [p.name for p in replacement.pods] == ["pa"]  # pp went to b, pa could not
    assert ctx.simulate([a], consolidation=False).replacements == ()  # drift: both fit on b


async def test_drift_takes_the_longest_drifted_node_first() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "1"}])
    w.node("a", conditions=("Drifted",))
    w.node("b", conditions=("Drifted",))
    w.pod("p1", "a", cpu="3")
    w.pod("p2", "b", cpu="3")
    for name, drifted_at in (("a", w.clock.now() - 60), ("b", w.clock.now() - 600)):
        claim = w.kube.objects[("nodeclaims", "", name)]
        drifted = next(c for c in claim["status"]["conditions"] if c["type"] == "Drifted")
        drifted["lastTransitionTime"] = disruption_world.ts(drifted_at)
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert [c.name for c in cmd.candidates] == ["b"]  # drifted nine minutes earlier, though "a" sorts first by name


async def test_no_delete_that_needs_an_uninitialized_node() -> None:
    # upstream consolidation_test.go "won't delete node if it would require pods to schedule on an uninitialized
    # node": b's pod fits in a's free room, but a has not initialized, so nothing is decided on it
    w = disruption_world.World()
    w.pool()
    w.node("a", itype="c2")
    w.node("b", itype="c2")
    w.pod("pa0", "a", cpu="500m")
    w.pod("pa1", "a", cpu="500m")
    w.pod("pb", "b", cpu="500m")
    w.uninitialize("a")
    assert await w.reconcile(w.controller()) is None  # a new c2 for pb would cost what b costs
    assert not w.kube.writes
    messages = {e.message for e in w.recorder.events if e.reason == "Unconsolidatable" and e.name == "b"}
    why = "would schedule against uninitialized nodeclaim/a, node/a"
    assert messages == {f"Not all pods would schedule, default/pb => {why}"}


async def test_pods_go_to_an_initialized_node_before_an_uninitialized_one() -> None:
    # upstream consolidation_test.go "should consider initialized nodes before uninitialized nodes": with room on
    # both, the candidate's pod is placed on the initialized node, and that decides; b and c together would fit
    # only on a, which has not initialized
    w = disruption_world.World()
    w.pool()
    w.node("a", itype="c2")  # sorts first by name, but has not initialized
    w.node("b", itype="c2")
    w.node("c", itype="c2")
    w.pod("pa", "a", cpu="500m")
    w.pod("pb", "b", cpu="500m")
    w.pod("pc", "c", cpu="500m")
    w.uninitialize("a")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert cmd.method == "single-node-consolidation"
    assert (cmd.decision, [c.name for c in cmd.candidates]) == ("delete", ["b"])
