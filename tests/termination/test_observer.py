"""The finalizer's observer with the operator's real series and a recorder: what each answer of the Eviction API
is counted and told as (core: node/termination/terminator/eviction.go, terminator/events/events.go, metrics.go)."""

from __future__ import annotations

import pytest
from tests import builders
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks

from karpy import clock as karpy_clock
from karpy import events
from karpy.kube import client as kube_client
from karpy.runtime import metrics
from karpy.termination import observer

Outcome = kube_client.EvictionOutcome
REQUESTS = "karpenter_pods_eviction_requests_total"
DRAINED = "karpenter_pods_drained_total"
FAILED = "Eviction failed (the pod may match several PDBs)"


@pytest.mark.parametrize(
    ("outcome", "code", "drained", "told"),
    [
        (Outcome.EVICTED, "200", 1.0, [("Normal", "Evicted", "Evicted pod: Underutilized")]),
        (Outcome.BLOCKED, "429", 0.0, []),  # a budget's refusal only backs off
        (Outcome.NOT_FOUND, "404", 0.0, []),  # already gone: nothing was drained
        (Outcome.FAILED, "500", 0.0, [("Warning", "FailedEviction", FAILED)]),
    ],
)
def test_each_eviction_answer_is_counted_by_code_and_told_about_the_pod(
    outcome: kube_client.EvictionOutcome, code: str, drained: float, told: list[tuple[str, str, str]]
) -> None:
    m, recorder = metrics.Metrics(), events.MemoryRecorder()
    pod = builders.parsed_drain_pod("web", uid="uid-web")
    observer.Observer(recorder, m.termination_hooks()).eviction(pod, outcome, reason="Underutilized")
    assert runtime_test_metrics_hooks.counter(m, REQUESTS, code=code) == 1.0
    assert runtime_test_metrics_hooks.counter(m, DRAINED, reason="Underutilized") == drained
    assert [(e.type, e.reason, e.message) for e in recorder.events] == told
    assert {(e.kind, e.namespace, e.name, e.uid) for e in recorder.events} <= {("Pod", pod.namespace, "web", "uid-web")}


def test_a_released_node_is_counted_under_its_pool_and_zone_with_its_durations() -> None:
    m, recorder = metrics.Metrics(), events.MemoryRecorder()
    node = builders.node("n1", labels={"karpenter.sh/nodepool": "team", "topology.kubernetes.io/zone": "zone-a"})
    node["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
    node["metadata"]["deletionTimestamp"] = "2023-11-14T23:13:20Z"
    released_at = 1_700_003_600.0 + 30.0  # 30 s after the deletion request, 1 h 30 s after creation
    observer.Observer(recorder, m.termination_hooks()).released(node, released_at)

    def value(name: str, **label_values: str) -> float:
        return runtime_test_metrics_hooks.counter(m, name, **label_values)

    assert value("karpenter_nodes_terminated_total", nodepool="team", zone="zone-a") == 1.0
    assert value("karpenter_nodes_termination_duration_seconds_sum", nodepool="team") == 30.0
    assert value("karpenter_nodes_lifetime_duration_seconds_sum", nodepool="team") == 3630.0
    assert recorder.events == []


def test_failed_draining_is_told_once_per_node_within_the_dedupe_timeout() -> None:
    """NodeFailedToDrain carries the Node's name as its dedupe value (terminator/events/events.go), so the recorder
    drops repeats for its default 2 minutes, whatever the count of waiting pods says."""
    clock = karpy_clock.ManualClock()
    recorder, m = events.MemoryRecorder(clock), metrics.Metrics()
    told = observer.Observer(recorder, m.termination_hooks())
    node, other = builders.node("n1"), builders.node("n2")
    told.failed_draining(node, 3)
    told.failed_draining(node, 2)
    told.failed_draining(other, 1)
    clock.advance(events.DEFAULT_DEDUPE_TIMEOUT)
    told.failed_draining(node, 1)
    assert [(e.name, e.message) for e in recorder.events] == [
        ("n1", "Failed to drain node, 3 pods are waiting to be evicted"),
        ("n2", "Failed to drain node, 1 pods are waiting to be evicted"),
        ("n1", "Failed to drain node, 1 pods are waiting to be evicted"),
    ]
