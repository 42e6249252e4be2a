"""Consolidation never moves a pod asking for DRA resources while IGNORE_DRA_REQUESTS is on: its placement could
not be simulated, so its node stays (upstream: the simulation's pods fail with the DRA error)."""

from __future__ import annotations

import pytest
from tests.disruption import world as disruption_world

from karpy import settings
from karpy.disruption import blockers


@pytest.mark.parametrize(("ignore", "consolidated"), [(True, False), (False, True)])
async def test_a_node_with_a_dra_pod_is_consolidated_only_when_dra_is_not_ignored(
    ignore: bool, consolidated: bool
) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.node("b")
    w.pod("claimed", "a", cpu="1")
    w.kube.objects[("pods", "default", "claimed")]["spec"]["resourceClaims"] = [{"name": "gpu"}]
    w.pod("pb", "b", cpu="1")
    w.kube.objects[("pods", "default", "pb")]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    cmd = await w.reconcile(w.controller(scheduling=settings.SchedulingSettings(ignore_dra_requests=ignore)))
    assert (cmd is not None) is consolidated
    if not consolidated:
        reasons = [e.message for e in w.recorder.events if e.name == "a" and e.reason == blockers.UNCONSOLIDATABLE]
        assert reasons
