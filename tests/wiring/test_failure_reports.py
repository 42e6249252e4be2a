"""What a work queue's failed reconcile reports (wiring/graph.py `reporting`): a failure of the API server, the
network or the cloud is retried with the queue's own line and is no rejection of the object; anything else is
reported on the object, saying it is tried again, not left alone."""

from __future__ import annotations

import logging

import pytest

from karpy.kube import client
from karpy.runtime import parts, workqueue

from .test_gated_controllers import _controller


def _fail(queue: workqueue.WorkQueue, key: str, exc: Exception) -> None:
    hook = queue._on_error  # the hook the wiring gave the queue, as the queue calls it after a failed reconcile
    assert hook is not None
    hook(key, exc)


@pytest.mark.parametrize(
    "exc",
    [client.KubeError(409, "Conflict", "the object has been modified"), ConnectionResetError("reset by peer")],
)
def test_a_transient_failure_is_no_rejection(exc: Exception, caplog: pytest.LogCaptureFixture) -> None:
    ctrl = _controller("")
    with caplog.at_level(logging.ERROR):
        _fail(ctrl.queues[parts.NODEPOOLS], "default", exc)
    assert ctrl.rejections.rejected("NodePool") == []
    assert [r for r in caplog.records if r.name == "karpy.rejections"] == []


def test_any_other_failure_is_reported_on_the_object_as_retried(caplog: pytest.LogCaptureFixture) -> None:
    ctrl = _controller("")
    with caplog.at_level(logging.ERROR):
        _fail(ctrl.queues[parts.NODEPOOLS], "default", KeyError("spec"))
    assert ctrl.rejections.rejected("NodePool") == ["default"]
    (line,) = [r for r in caplog.records if r.name == "karpy.rejections"]
    assert line.getMessage() == (
        "failed handling NodePool default and tries again later: reconciling it raised KeyError: 'spec'"
    )
