"""Deleting every NodePool, as `pulumi destroy` does with the component's default NodePool (foreground propagation,
`pulumi.com/deletionPropagationPolicy: foreground`), leaves no NodeClaim, Node or instance, and each NodePool stays
until its NodeClaims are gone: what destroy waits on before it removes the controller and its IAM.

The owner references are followed by the garbage-collector stand-in (karpy_emulator.garbage), as kube-controller-manager
follows them on a real cluster; the controller drains and terminates every node it is handed."""

from __future__ import annotations

import aiohttp
from tests.e2e import support

from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads


async def delete_in_foreground(emulated: cluster.EmulatedCluster, name: str) -> None:
    """The request pulumi-kubernetes sends for a resource annotated for foreground deletion."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
    async with (
        aiohttp.ClientSession() as session,
        session.delete(f"{emulated.api_url}{resources.NODEPOOLS.path(name)}", json=body) as response,
    ):
        assert response.status == 200, await response.text()


async def test_deleting_every_nodepool_leaves_no_nodeclaim_node_or_instance(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool("general"), support.pool("spare"))
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("inflate", 6, cpu="1"))
    await support.eventually(
        lambda: support.all_bound(emulated, "inflate", 6), clock=emulated.clock, within=90, what="6 pods bound"
    )
    assert await support.claims(emulated)
    assert await support.running_instances(emulated)

    for name in ("general", "spare"):
        await delete_in_foreground(emulated, name)

    async def pools_wait_for_their_claims() -> bool:
        """Polled until nothing is left; a NodePool must never go while a NodeClaim it owns is still there."""
        pools, _ = await emulated.client.list(resources.NODEPOOLS)
        claims = await support.claims(emulated)
        owners = {ref["name"] for c in claims for ref in c["metadata"].get("ownerReferences") or ()}
        assert owners <= {p["metadata"]["name"] for p in pools}, "a NodePool went before its NodeClaims"
        for pool in pools:
            assert "foregroundDeletion" in pool["metadata"]["finalizers"]
        return not pools and await support.nothing_left(emulated)

    await support.eventually(
        pools_wait_for_their_claims, clock=emulated.clock, within=120, what="no NodePool, NodeClaim, node or instance"
    )
