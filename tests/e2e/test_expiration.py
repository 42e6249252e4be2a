"""Expiration end to end: a NodeClaim older than its pool's expireAfter is deleted (forcefully, without a budget),
its node drained, its instance terminated, and its pods land on a replacement."""

from __future__ import annotations

import pytest
from tests.e2e import support

from karpy.sim import cluster, controlplane, workloads


@pytest.mark.slow
async def test_expired_nodeclaim_is_replaced(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool(expire_after="20s", consolidate_after="Never"))
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("aging", 2))
    await support.eventually(lambda: support.all_bound(emulated, "aging", 2), within=45, what="aging bound")
    (first,) = await support.claims(emulated)
    old_instance = first["status"]["providerID"].rsplit("/", 1)[-1]

    async def replaced() -> bool:
        names = {c["metadata"]["name"] for c in await support.claims(emulated)}
        bound = await support.all_bound(emulated, "aging", 2)
        return bool(names) and first["metadata"]["name"] not in names and bool(bound)

    await support.eventually(replaced, within=75, what="the expired NodeClaim replaced")
    assert old_instance not in await support.running_instances(emulated)
