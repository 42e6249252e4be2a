"""The provisioner's per-pod instants (core: state/cluster.go AckPods, MarkPodSchedulingDecisions): first sight,
first decision and first placement, each kept from its first occurrence, on the injected clock."""

from __future__ import annotations

from karpy.clock import ManualClock
from karpy.provisioning import podtimes


def test_only_the_first_sight_counts() -> None:
    manual = ManualClock(100.0)
    times = podtimes.PodTimes(manual)
    times.seen("default/a")
    manual.advance(5.0)
    times.seen("default/a")
    assert times.seen_at("default/a") == 100.0


def test_the_first_decision_reports_the_wait_since_first_sight_once() -> None:
    manual = ManualClock(100.0)
    times = podtimes.PodTimes(manual)
    times.seen("default/a")
    times.seen("default/b")
    manual.advance(3.0)
    assert times.decided(failed=["default/b"], placed=["default/a"]) == [3.0, 3.0]
    manual.advance(1.0)
    assert times.decided(failed=["default/b"], placed=["default/a"]) == []  # decided already
    assert (times.decided_at("default/a"), times.schedulable_since("default/a")) == (103.0, 103.0)
    assert (times.decided_at("default/b"), times.schedulable_since("default/b")) == (103.0, None)


def test_a_pod_never_seen_is_decided_without_a_wait() -> None:
    times = podtimes.PodTimes(ManualClock(100.0))
    assert times.decided(failed=[], placed=["default/a"]) == []
    assert times.schedulable_since("default/a") == 100.0


def test_a_failed_solve_restarts_the_schedulable_clock() -> None:
    manual = ManualClock(100.0)
    times = podtimes.PodTimes(manual)
    times.decided(failed=[], placed=["default/a"])
    manual.advance(10.0)
    times.decided(failed=[], placed=["default/a"])
    assert times.schedulable_since("default/a") == 100.0  # the first placement is kept
    times.decided(failed=["default/a"], placed=[])
    assert times.schedulable_since("default/a") is None
    manual.advance(10.0)
    times.decided(failed=[], placed=["default/a"])
    assert times.schedulable_since("default/a") == 120.0


def test_forgetting_a_pod_drops_every_instant() -> None:
    times = podtimes.PodTimes(ManualClock(100.0))
    times.seen("default/a")
    times.decided(failed=[], placed=["default/a"])
    times.forget("default/a")
    times.forget("default/never-seen")
    assert (times.seen_at("default/a"), times.decided_at("default/a"), times.schedulable_since("default/a")) == (
        None,
        None,
        None,
    )
    assert len(times) == 0
