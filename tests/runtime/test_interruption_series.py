"""The interruption loop's upstream series with the operator's hooks (aws: interruption/controller.go
`MessageLatency`, instancestatus_controller.go `InstanceStatusUnhealthy`): the queue's event-to-handled latency,
and each unhealthy status-check finding about an instance of this cluster counted once by category."""

from __future__ import annotations

import pytest
from tests.interruption import test_controller as interruption_test_controller
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks

from karpy.cloudprovider import interruption
from karpy.interruption import controller, observer
from karpy.runtime import metrics

K = interruption.Kind
LATENCY = "karpenter_interruption_message_queue_duration_seconds"
UNHEALTHY = "karpenter_interruption_instance_status_unhealthy_total"


async def _env(m: metrics.Metrics) -> interruption_test_controller.Env:
    env = await interruption_test_controller._env(interruption_test_controller.running_claim("a", "i-a", node="n-a"))
    counted = observer.Observer(env.recorder, m.interruption_hooks())
    env.ctl = controller.InterruptionController(
        controller.Deps(client=env.kube, cluster=env.cluster, queue=env.queue, clock=env.clock, observer=counted)
    )
    return env


def _put(env: interruption_test_controller.Env, message: interruption.Message) -> None:
    env.queue.waiting.append(interruption.Received(message, f"rh-{message.event_id}"))


async def test_a_queue_message_observes_the_time_since_its_event() -> None:
    m = metrics.Metrics()
    env = await _env(m)
    env.clock.advance(100.0)
    _put(env, interruption.Message(K.SPOT_INTERRUPTION, ("i-a",), event_id="e1", event_time=58.0))
    await env.ctl.poll()
    assert runtime_test_metrics_hooks.counter(m, f"{LATENCY}_count") == 1
    assert runtime_test_metrics_hooks.counter(m, f"{LATENCY}_sum") == 42.0


@pytest.mark.parametrize(
    ("kind", "category", "instance", "counted"),
    [
        (K.SYSTEM_STATUS, "SystemStatus", "i-a", 1),
        (K.INSTANCE_STATUS, "InstanceStatus", "i-a", 1),
        (K.SCHEDULED_CHANGE, "EventStatus", "i-a", 1),
        (K.SYSTEM_STATUS, "SystemStatus", "i-elsewhere", 0),  # not an instance of this cluster
    ],
)
async def test_an_unhealthy_finding_about_a_cluster_instance_is_counted_by_category(
    kind: interruption.Kind, category: str, instance: str, counted: int
) -> None:
    m = metrics.Metrics()
    env = await _env(m)
    _put(env, interruption.Message(kind, (instance,), event_id="f1", event_time=0.0, status_category=category))
    await env.ctl.poll()
    assert runtime_test_metrics_hooks.counter(m, UNHEALTHY, category=category) == counted
    assert runtime_test_metrics_hooks.counter(m, f"{LATENCY}_count") == 0  # the status poll is no queue
