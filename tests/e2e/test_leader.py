"""Two controller replicas with Lease leader election (the operator's elector and `leadership.lead`, as `karpy run` runs
them): only the leader acts; when it dies (a crash: it cannot give the Lease up) the other takes over once the Lease
expires and provisions the next pods.

The replicas share one event loop, so they run without Kopf: a stopping Kopf operator cancels every task started
after it in its loop, which would take the other replica down with it (Kopf's own path: test_scale_up)."""

from __future__ import annotations

import dataclasses

import pytest
from tests.e2e import support

from karpy import settings
from karpy.kube import resources
from karpy.runtime import lease as runtime_lease
from karpy_emulator import cluster, controlplane, workloads


def _leader(planes: list[controlplane.ControlPlane]) -> list[str]:
    return [p.options.identity for p in planes if p.leading]


async def _holder(emulated: cluster.EmulatedCluster) -> str:
    name = settings.LeaderElectionSettings().name
    lease = await emulated.client.get(resources.LEASES, name, namespace="default")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


@pytest.mark.slow
async def test_only_the_leader_acts_and_the_other_takes_over_when_it_dies(emulated: cluster.EmulatedCluster) -> None:
    await support.apply_defaults(emulated)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("ha", 0))
    replica = dataclasses.replace(support.FAST, leader_election=True)
    first = controlplane.ControlPlane(emulated, dataclasses.replace(replica, identity="a"))
    second = controlplane.ControlPlane(emulated, dataclasses.replace(replica, identity="b"))
    planes = [first, second]
    try:
        first.start()

        async def a_leads() -> bool:
            return _leader(planes) == ["a"]

        await support.eventually(a_leads, clock=emulated.clock, within=20, what="replica a to lead")
        second.start()
        await support.scale(emulated, "ha", 1)
        await support.eventually(
            lambda: support.all_bound(emulated, "ha", 1), clock=emulated.clock, within=45, what="ha bound by a"
        )
        assert _leader(planes) == ["a"]  # b never led while a held the Lease

        await first.kill()  # the leader crashes: nothing it would still write reaches the API server
        assert await _holder(emulated) == "a"  # it did not hand the Lease over: b must wait for it to expire

        async def b_leads() -> bool:
            return _leader(planes) == ["b"]

        await support.eventually(
            b_leads, clock=emulated.clock, within=runtime_lease.LEASE_DURATION + 30, what="replica b to take over"
        )
        assert await _holder(emulated) == "b"
        await support.scale(emulated, "ha", 4)
        await support.eventually(
            lambda: support.all_bound(emulated, "ha", 4), clock=emulated.clock, within=45, what="ha bound by b"
        )
    finally:
        for plane in planes:
            await plane.stop()
