"""`Rejections`: one Event, one log line naming the field and one count per object and problem; a new problem, or
the same one after the object read again, is reported afresh."""

from __future__ import annotations

import logging

import pytest
from tests import builders

from karpy import events, rejections
from karpy.api import parse
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import client, resources


class _Counted(rejections.Metrics):
    def __init__(self, into: list[tuple[str, str]]) -> None:
        self._into = into

    def rejected(self, kind: str, reason: str) -> None:
        self._into.append((kind, reason))


def _sink() -> tuple[rejections.Rejections, events.MemoryRecorder, list[tuple[str, str]]]:
    recorder = events.MemoryRecorder()
    counted: list[tuple[str, str]] = []
    sink = rejections.Rejections(recorder, metrics=_Counted(counted))
    return sink, recorder, counted


def test_a_rejection_is_an_event_a_log_line_and_a_count_once(caplog: pytest.LogCaptureFixture) -> None:
    sink, recorder, counted = _sink()
    pod = rejections.about(resources.PODS, {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}})
    with caplog.at_level(logging.ERROR, logger=rejections.__name__):
        for _ in range(3):
            sink.report(pod, reason=rejections.Reason.INVALID, problem="spec.containers[0].resources.requests.cpu: x")
    (event,) = recorder.events
    assert (event.kind, event.namespace, event.name, event.uid) == ("Pod", "ns", "p", "u1")
    assert (event.type, event.reason) == ("Warning", "InvalidObject")
    assert "spec.containers[0].resources.requests.cpu" in event.message
    (line,) = caplog.records
    assert line.object == "ns/p"  # type: ignore[attr-defined]
    assert "spec.containers[0]" in line.error  # type: ignore[attr-defined]
    assert counted == [("Pod", "invalid")]
    assert sink.rejected("Pod") == ["ns/p"]


def test_a_new_problem_or_a_fresh_rejection_after_acceptance_is_reported_again() -> None:
    sink, recorder, counted = _sink()
    claim = rejections.about(resources.NODECLAIMS, name="c")
    sink.report(claim, reason=rejections.Reason.INVALID, problem="spec: a")
    sink.report(claim, reason=rejections.Reason.INVALID, problem="spec: b")
    sink.accept("NodeClaim", "c")
    assert sink.rejected("NodeClaim") == []
    sink.report(claim, reason=rejections.Reason.INVALID, problem="spec: b")
    sink.report(claim, reason=rejections.Reason.HANDLING_FAILED, problem="spec: b")
    assert counted == [("NodeClaim", "invalid")] * 3 + [("NodeClaim", "handling_failed")]
    assert [e.reason for e in recorder.events] == ["InvalidObject"] * 3 + ["HandlingFailed"]


def test_long_problems_are_cut_and_identity_is_read_leniently() -> None:
    sink, recorder, _ = _sink()
    broken = rejections.about(resources.NODES, {"metadata": ["not", "an", "object"]}, name="n1")
    sink.report(broken, reason=rejections.Reason.HANDLING_FAILED, problem="x" * 10_000)
    (event,) = recorder.events
    assert event.name == "n1"
    assert len(event.message) < rejections.MESSAGE_LIMIT + 200


def test_parse_or_report_reports_a_bad_object_and_accepts_a_good_one(caplog: pytest.LogCaptureFixture) -> None:
    sink = rejections.MemorySink()
    bad = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "bad"}, "spec": {"taints": 5}}
    assert rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, bad, sink) is None
    assert [(r.kind, r.key, r.reason) for r in sink.reports] == [("NodeClaim", "bad", rejections.Reason.INVALID)]
    assert "spec.taints" in sink.reports[0].problem
    claim = rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, builders.nodeclaim("good"), sink)
    assert claim is not None
    assert claim.name == "good"
    assert sink.accepted == [("NodeClaim", "good")]
    with caplog.at_level(logging.DEBUG, logger=rejections.__name__):
        assert rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, bad, None) is None
    assert "ignoring invalid nodeclaim" in caplog.text
    assert len(sink.reports) == 1


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (client.KubeError(409, "Conflict", "the object has been modified"), True),
        (client.KubeError(429, "TooManyRequests", "slow down"), True),
        (client.KubeError(503, "ServiceUnavailable", "etcd leader changed"), True),
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError(), True),
        (cloudprovider_errors.CloudProviderError("RequestLimitExceeded"), True),
        (client.KubeError(422, "Invalid", "spec.taints: Invalid value"), False),
        (KeyError("spec"), False),
    ],
)
def test_api_server_network_and_cloud_failures_are_transient(exc: Exception, transient: bool) -> None:
    assert rejections.transient(exc) is transient


def test_a_failed_handling_says_it_is_tried_again_not_left_alone() -> None:
    sink, recorder, _ = _sink()
    claim = rejections.about(resources.NODECLAIMS, name="default-abcde")
    sink.report(claim, reason=rejections.Reason.HANDLING_FAILED, problem="reconciling it raised KeyError: 'spec'")
    sink.report(claim, reason=rejections.Reason.INVALID, problem="spec.taints[0].effect: x")
    handling, invalid = (event.message for event in recorder.events)
    assert handling == (
        "karpy failed handling this NodeClaim and tries again later: reconciling it raised KeyError: 'spec'"
    )
    assert invalid == "karpy cannot read this NodeClaim and leaves it alone until it changes: spec.taints[0].effect: x"
