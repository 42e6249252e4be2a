"""The CapacityBuffers' operatorpkg series (core: pkg/controllers/controllers.go runs
`status.NewGenericObjectController[*CapacityBuffer]` with `status.EmitDeprecatedMetrics` and the 0.5-8192 s
exponential buckets under the CapacityBuffer gate; operatorpkg: status/controller.go, status/metrics.go): after the
buffer controller's reconcile writes ReadyForProvisioning, the state cache's watch update counts the transition and
the scrape shows the condition, per kind and in the deprecated kind-less families."""

from __future__ import annotations

import pytest
from tests.capacitybuffer import test_controller
from tests.runtime import exporting

from karpy.kube import client, resources, rest
from karpy.runtime import metrics
from karpy.runtime.metrics import operatorpkg

BUFFER = {"group": "autoscaling.x-k8s.io", "kind": "CapacityBuffer"}


class Watched(test_controller.Harness):
    """The controller's harness with the controller's metrics watching its state cache, as the leader's do."""

    def __init__(self, api: rest.RestClient) -> None:
        super().__init__(api)
        self.metrics = metrics.Metrics()
        self.metrics.watch_objects(operatorpkg.CAPACITYBUFFERS)  # as the wiring does under the gate
        self.metrics.watch_cluster_series(self.cache, now=self.now.now)
        self.cache.add_listener(self.metrics.object_listener(now=self.now.now, leading=lambda: True))

    def value(self, series: str, /, **label_values: str) -> float | None:
        return exporting.samples(self.metrics, series).get(tuple(sorted(label_values.items())))


@pytest.fixture
def w(api: rest.RestClient) -> Watched:
    return Watched(api)


async def test_a_reconciled_buffer_shows_its_ready_for_provisioning_condition_and_its_transition(w: Watched) -> None:
    await w.create(resources.PODTEMPLATES, test_controller._pod_template("chunk"))
    await w.create(
        resources.CAPACITYBUFFERS, test_controller._buffer("room", podTemplateRef={"name": "chunk"}, replicas=2)
    )
    await w.create(
        resources.CAPACITYBUFFERS, test_controller._buffer("lost", podTemplateRef={"name": "nope"}, replicas=1)
    )
    where = {"namespace": test_controller.NS}
    assert w.value("operator_capacitybuffer_status_condition_count", **where, name="room") is None  # no status yet

    await w.reconcile("room")
    await w.reconcile("lost")
    resolved = {"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved"}
    missing = {"type": "ReadyForProvisioning", "status": "False", "reason": "PodTemplateNotFound"}
    count = "operator_capacitybuffer_status_condition_count"
    assert w.value(count, **where, name="room", **resolved) == 1
    assert w.value(count, **where, name="lost", **missing) == 1
    assert w.value("operator_status_condition_count", **where, name="room", **resolved, **BUFFER) == 1
    for turned in (resolved, missing):  # first seen True or False: a transition, as operatorpkg's first reconcile
        assert w.value("operator_capacitybuffer_status_condition_transitions_total", **turned) == 1
        assert w.value("operator_status_condition_transitions_total", **turned, **BUFFER) == 1
    w.now.advance(30)
    current = "operator_capacitybuffer_status_condition_current_status_seconds"
    assert w.value(current, **where, name="room", **resolved) == 30

    await w.reconcile("room")  # unchanged: nothing more turned
    assert w.value("operator_capacitybuffer_status_condition_transitions_total", **resolved) == 1


async def test_a_buffer_being_deleted_is_timed(w: Watched) -> None:
    made = await w.create(resources.CAPACITYBUFFERS, test_controller._buffer("going", replicas=1))
    leaving = {
        **made,
        "metadata": {**made["metadata"], "deletionTimestamp": "1970-01-01T00:16:40Z"},
    }  # the clock's 1000 s
    w.cache.apply(resources.CAPACITYBUFFERS, client.WatchEvent(client.MODIFIED, leaving))
    w.now.advance(12)
    where = {"namespace": test_controller.NS, "name": "going"}
    assert w.value("operator_capacitybuffer_termination_current_time_seconds", **where) == 12
    w.cache.apply(resources.CAPACITYBUFFERS, client.WatchEvent(client.DELETED, leaving))
    assert w.value("operator_capacitybuffer_termination_duration_seconds_count") == 1
    assert w.value("operator_capacitybuffer_termination_duration_seconds_sum") == 12
