"""The disruption loop's upstream series, driven through the real controller and the operator's hooks: each case
reads its series back from the registry, so a hook that stops being called fails here (core:
disruption/controller.go, queue.go, validation.go, multinodeconsolidation.go, singlenodeconsolidation.go)."""

from __future__ import annotations

import asyncio

import pytest
from tests.disruption import world as disruption_world
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks

from karpy import clock as karpy_clock
from karpy import events
from karpy.api import nodepool
from karpy.disruption import methods, publisher, simulation
from karpy.kube import resources
from karpy.runtime import metrics

Reason = nodepool.DisruptionReason


async def test_an_empty_node_is_a_decision_of_its_pool_and_every_method_tried_is_timed() -> None:
    m, w = metrics.Metrics(), disruption_world.World()
    w.pool()
    w.node("n0")
    assert await w.reconcile(w.controller(metrics=m.disruption_hooks())) is not None
    decision = {"nodepool": "default", "decision": "delete", "reason": "empty", "consolidation_type": "empty"}
    assert (
        runtime_test_metrics_hooks.counter(m, "karpenter_voluntary_disruption_decisions_by_nodepool_total", **decision)
        == 1
    )
    timed = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count"
    assert runtime_test_metrics_hooks.counter(m, timed, reason="empty", consolidation_type="empty") == 1


async def test_a_command_that_fails_validation_counts_its_candidates() -> None:
    m, w = metrics.Metrics(), disruption_world.World()
    w.pool()
    w.node("n0", itype="c2")  # the cheapest type: once it has a pod, no later method of the pass has a command
    ctrl = w.controller(metrics=m.disruption_hooks())
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    w.pod("late", "n0")  # lands during the validation delay: no longer empty
    w.sync()
    await w.clock.run_for(11)
    assert (await task).command is None
    failed = "karpenter_voluntary_disruption_failed_validations_total"
    assert runtime_test_metrics_hooks.counter(m, failed, consolidation_type="empty") == 1


async def test_a_replacement_that_vanishes_counts_as_a_queue_failure() -> None:
    m, w = metrics.Metrics(), disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    ctrl = w.controller(metrics=m.disruption_hooks())
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.decision == "replace"
    del w.kube.objects[("nodeclaims", "", ctrl.queue.items[0].replacements[0])]  # ICE: the lifecycle deleted it
    await ctrl.queue.reconcile()
    labels = {"decision": "replace", "reason": "underutilized", "consolidation_type": "single"}
    assert runtime_test_metrics_hooks.counter(m, "karpenter_voluntary_disruption_queue_failures_total", **labels) == 1


@pytest.mark.parametrize(
    ("tgp", "mode"),
    [(None, "graceful"), ("1h", "eventual"), ("0s", "forceful")],
)
async def test_a_disrupted_nodeclaim_counts_its_reschedulable_pods_with_upstreams_labels(
    tgp: str | None, mode: str
) -> None:
    m, w = metrics.Metrics(), disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",), tgp=tgp)
    w.pod("p1", "a", cpu="1")
    w.pod("p2", "a", cpu="1")
    ctrl = w.controller(metrics=m.disruption_hooks())
    assert await w.reconcile(ctrl) is not None
    (replacement,) = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] != "a"]
    w.kube.objects[("nodeclaims", "", replacement["metadata"]["name"])]["status"] = {
        "conditions": [disruption_world.cond("Initialized")]
    }
    await ctrl.queue.reconcile()
    labels = {
        "reason": "drifted", "nodepool": "default", "capacity_type": "on-demand",
        "consolidation_policy": "", "termination_mode": mode,
    }  # fmt: skip
    assert runtime_test_metrics_hooks.counter(m, "karpenter_pods_disruption_initiated_total", **labels) == 2
    assert runtime_test_metrics_hooks.counter(m, "karpenter_nodeclaims_disrupted_total", **labels) == 1


async def test_a_consolidation_deletion_carries_its_pools_policy() -> None:
    m, w = metrics.Metrics(), disruption_world.World()
    w.pool()
    w.node("n0")
    ctrl = w.controller(metrics=m.disruption_hooks())
    assert await w.reconcile(ctrl) is not None
    await ctrl.queue.reconcile()  # a delete has no replacement to wait for
    labels = {
        "reason": "empty", "nodepool": "default", "capacity_type": "on-demand",
        "consolidation_policy": "when_empty_or_underutilized", "termination_mode": "graceful",
    }  # fmt: skip
    assert runtime_test_metrics_hooks.counter(m, "karpenter_nodeclaims_disrupted_total", **labels) == 1


class _SlowNoFit:
    """Each simulation costs `cost` virtual seconds and finds no room."""

    def __init__(self, clock: karpy_clock.ManualClock, cost: float) -> None:
        self.clock, self.cost = clock, cost

    def __call__(self, chosen: object, /, *, consolidation: bool = True) -> simulation.Simulation:
        self.clock.advance(self.cost)
        return simulation.Simulation(replacements=(), unschedulable={"default/p": "no room"})


@pytest.mark.parametrize(
    ("method", "cost", "label", "timeouts"),
    [
        (methods.SingleNodeConsolidation(), 100.0, "single", 1),  # 200 s for two: past the 180 s timeout
        (methods.SingleNodeConsolidation(), 10.0, "single", 0),
        (methods.MultiNodeConsolidation(), 61.0, "multi", 1),  # the first step alone passed 60 s
        (methods.MultiNodeConsolidation(), 1.0, "multi", 0),
    ],
)
def test_a_consolidation_that_reaches_its_timeout_is_counted(
    method: methods.Method, cost: float, label: str, timeouts: int
) -> None:
    m, clock = metrics.Metrics(), karpy_clock.ManualClock()
    cands = [disruption_world.candidate(f"n{i}", price=1.0 - i / 10) for i in range(4)]
    ctx = methods.Context(
        clock=clock, seq=1, graceful=cands, eventual=(), budgets={Reason.UNDERUTILIZED: {"default": 100}},
        simulate=_SlowNoFit(clock, cost),
        observer=publisher.Publisher(events.MemoryRecorder(), m.disruption_hooks()),
    )  # fmt: skip
    method.compute(ctx)
    name = "karpenter_voluntary_disruption_consolidation_timeouts_total"
    assert runtime_test_metrics_hooks.counter(m, name, consolidation_type=label) == timeouts
