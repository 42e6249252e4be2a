"""Two controller replicas with Lease leader election: only the leader acts; when it dies the other takes over and
provisions the next pods."""

from __future__ import annotations

import dataclasses

import pytest
from tests.e2e import support

from karpy.sim import cluster, controlplane, workloads


def _leader(planes: list[controlplane.ControlPlane]) -> list[str]:
    return [p.options.identity for p in planes if p.leading]


@pytest.mark.slow
async def test_only_the_leader_acts_and_the_other_takes_over(emulated: cluster.EmulatedCluster) -> None:
    await support.apply_defaults(emulated)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("ha", 0))
    first = controlplane.ControlPlane(emulated, dataclasses.replace(support.FAST, identity="a", leader_election=True))
    second = controlplane.ControlPlane(emulated, dataclasses.replace(support.FAST, identity="b", leader_election=True))
    planes = [first, second]
    try:
        first.start()

        async def a_leads() -> bool:
            return _leader(planes) == ["a"]

        await support.eventually(a_leads, within=20, what="replica a to lead")
        second.start()
        await support.scale(emulated, "ha", 1)
        await support.eventually(lambda: support.all_bound(emulated, "ha", 1), within=45, what="ha bound by a")
        assert _leader(planes) == ["a"]  # b never led while a held the Lease

        await first.stop()  # the leader dies

        async def b_leads() -> bool:
            return _leader(planes) == ["b"]

        await support.eventually(b_leads, within=30, what="replica b to take over")
        await support.scale(emulated, "ha", 4)
        await support.eventually(lambda: support.all_bound(emulated, "ha", 4), within=45, what="ha bound by b")
    finally:
        for plane in planes:
            await plane.stop()
