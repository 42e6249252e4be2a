"""The do-not-disrupt Events upstream publishes about a pod whenever disruption evaluates its duration-form annotation
(core: pkg/utils/pod/scheduling.go `IsDoNotDisruptActive`, events.go): still protecting until a time, elapsed, or
invalid (a Warning; the annotation is ignored). Repeats within the dedupe window are dropped."""

from __future__ import annotations

import pytest
from tests.disruption import world as disruption_world

from karpy.api import decoding, labels


@pytest.mark.parametrize(
    ("value", "started_ago", "type_", "reason", "message"),
    [
        ("30m", 600.0, "Normal", "DoNotDisruptUntil", "grace period will elapse at {until}"),
        ("30m", 3600.0, "Normal", "DoNotDisruptGracePeriodElapsed", "grace period has elapsed, pod is now disruptable"),
        ("soon", 600.0, "Warning", "InvalidDoNotDisruptAnnotation", "ignoring annotation"),
        ("-5m", 600.0, "Warning", "InvalidDoNotDisruptAnnotation", "ignoring annotation"),
    ],
)
async def test_a_pod_with_a_duration_annotation_gets_upstreams_event(
    value: str, started_ago: float, type_: str, reason: str, message: str
) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    started = w.clock.now() - started_ago
    w.pod("p", "n0", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: value}, started=started)
    ctrl = w.controller()
    await w.reconcile(ctrl)
    found = [e for e in w.recorder.events if e.kind == "Pod" and e.name == "p"]
    assert [(e.type, e.reason) for e in found] == [(type_, reason)]  # once, though two passes read the pod
    assert message.format(until=decoding.format_timestamp(started + 1800)) in found[0].message


async def test_true_and_no_annotation_publish_nothing() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.pod("forever", "n0", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"}, started=w.clock.now())
    w.pod("plain", "n0", started=w.clock.now())
    await w.reconcile(w.controller())
    assert [e for e in w.recorder.events if e.kind == "Pod"] == []
