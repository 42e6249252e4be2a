"""Interruption end to end: a spot interruption warning sent through EventBridge → SQS (moto) reaches the controller,
which drains the node and replaces it (the pods run elsewhere, the NodeClaim and the instance are gone); an invalid
NodePool is refused by the API server with 422 while the valid pool keeps provisioning."""

from __future__ import annotations

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import client, resources
from karpy_emulator import cluster, controlplane, workloads


@pytest.mark.slow
async def test_spot_interruption_drains_and_replaces_the_node_and_an_invalid_pool_is_refused(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    invalid = support.pool("broken")
    invalid["spec"]["template"]["spec"]["requirements"] = [{"key": "kubernetes.io/arch", "operator": "Sideways"}]
    with pytest.raises(client.Invalid) as refused:
        await emulated.client.create(resources.NODEPOOLS, invalid)
    assert refused.value.status == 422
    spot = support.pool(requirements=[{"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}])
    spot["spec"]["template"]["spec"]["requirements"] = [
        r for r in spot["spec"]["template"]["spec"]["requirements"] if r["values"] != ["on-demand"]
    ]
    await support.apply_defaults(emulated, spot)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("batch", 2))
    await support.eventually(
        lambda: support.all_bound(emulated, "batch", 2), clock=emulated.clock, within=60, what="batch bound"
    )
    (claim,) = await support.claims(emulated)
    assert claim["metadata"]["labels"][labels.LABEL_CAPACITY_TYPE] == "spot"
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]

    await support.spot_interruption_warning(emulated, instance_id)

    async def moved() -> bool:
        claims = await support.claims(emulated)
        names = {c["metadata"]["name"] for c in claims}
        bound = await support.all_bound(emulated, "batch", 2)
        instances = await support.running_instances(emulated)
        return claim["metadata"]["name"] not in names and bool(bound) and instance_id not in instances

    await support.eventually(moved, clock=emulated.clock, within=90, what="the interrupted node drained and replaced")
