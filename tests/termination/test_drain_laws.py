"""Hypothesis laws of `drain.plan` over arbitrary pod sets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from karpy.termination import drain

T0 = 1_700_000_000.0

pods = st.builds(
    drain.DrainPod,
    namespace=st.just("ns"),
    name=st.text("abcdef", min_size=1, max_size=4),
    phase=st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
    priority_class=st.sampled_from(["", "system-node-critical", "system-cluster-critical", "high"]),
    daemon=st.booleans(),
    mirror=st.booleans(),
    tolerates_disrupted=st.booleans(),
    do_not_disrupt=st.sampled_from([None, "true", "false", "5m", "junk"]),
    started=st.sampled_from([None, T0 - 600, T0 - 60]),
    deletion_timestamp=st.sampled_from([None, T0 - 120, T0 - 30]),
    grace_seconds=st.sampled_from([0, 30, 300, 3600]),
)
pod_sets = st.lists(pods, max_size=12, unique_by=lambda p: p.name)
termination_times = st.sampled_from([None, T0 - 10, T0 + 60, T0 + 7200])


@given(pod_sets, termination_times)
def test_plan_laws(pods: list[drain.DrainPod], termination_time: float | None) -> None:
    step = drain.plan(pods, now=T0, termination_time=termination_time)
    evict, delete = {p.name for p in step.evict}, {p.name for p in step.delete}
    assert not evict & delete  # one action per pod
    assert delete <= {p.name for p in step.waiting}
    if termination_time is None:
        assert not delete  # never delete around the Eviction API without a termination grace period
    for p in step.evict:
        assert not p.mirror
        assert not p.terminal
        assert not p.terminating
        assert not p.tolerates_disrupted
        assert not drain.do_not_disrupt_active(p, T0)  # do-not-disrupt pods are never evicted
    if step.evict:
        tiers = {p.tier for p in step.evict}
        assert len(tiers) == 1  # one tier at a time ...
        lowest = min(p.tier for p in pods if drain.evictable(p, T0) and p.name not in delete)
        assert tiers == {lowest}  # ... the most disposable one first
    for p in step.delete:
        assert not p.terminating
        assert termination_time is not None
        assert termination_time - p.grace_seconds < T0
    assert step.drained == (not step.waiting)
