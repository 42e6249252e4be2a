"""Node auto repair end to end on the virtual clock (NodeRepair gate, the AWS provider's repair policies on moto):
a node whose AcceleratedHardwareReady turns False (the EKS node monitoring agent's GPU check) is replaced after its
10 minutes of toleration, its pods moving to the new node; when two of three nodes turn unhealthy (more than 20 %),
none is replaced and the nodes get NodeRepairBlocked warnings instead. The condition with the shortest toleration
keeps the virtual-time scenario short in real time; the 30-minute ones follow the same path (unit tests)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.charts import rbac
from tests.e2e import support

from karpy.api import decoding, labels
from karpy.kube import resources
from karpy.operator import settings
from karpy.sim import autojump, cluster, controlplane, workloads

TOLERATION = 10 * 60.0
CONDITION = "AcceleratedHardwareReady"
REPAIRING = controlplane.Options(
    interruption=False,  # the SQS long poll would hold virtual time still
    feature_gates=settings.FeatureGates(node_repair=True),
)
ONE_PER_HOST = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "spread"}}}
            ]
        }
    }
}


@pytest.fixture
async def virtual(
    request: pytest.FixtureRequest, chart_rbac: list[rbac.Rule]
) -> AsyncIterator[cluster.EmulatedCluster]:
    options = cluster.ClusterOptions(
        cluster_name=support.CLUSTER, boot_delay=5.0, interval=2.0, autojump=True, start_time=time.time()
    )
    async with cluster.EmulatedCluster(options) as running:
        yield running
        found = rbac.after_test(running.api.accesses.snapshot(), chart_rbac, test_id=request.node.nodeid)
        assert not found, "\n".join(found)


async def three_nodes(emulated: cluster.EmulatedCluster) -> list[dict[str, Any]]:
    await support.apply_defaults(emulated, support.pool(consolidate_after="Never"))
    await emulated.client.create(
        workloads.DEPLOYMENTS, support.deployment("spread", 3, cpu="500m", spec_extra=ONE_PER_HOST)
    )
    await support.eventually(lambda: support.all_bound(emulated, "spread", 3), within=45, what="spread bound")
    return await support.claims(emulated)


async def hardware_fault(emulated: cluster.EmulatedCluster, node_name: str) -> None:
    """What the EKS node monitoring agent reports on a failed accelerator: AcceleratedHardwareReady=False, from now."""
    node = await emulated.client.get(resources.NODES, node_name)
    assert node is not None
    kept = [c for c in node["status"].get("conditions") or () if c.get("type") != CONDITION]
    stamp = decoding.format_timestamp(emulated.clock.now())
    fault = {"type": CONDITION, "status": "False", "reason": "DeviceFailed", "lastTransitionTime": stamp}
    await emulated.client.patch(
        resources.NODES, node_name, {"status": {"conditions": [*kept, fault]}}, subresource="status"
    )


@pytest.mark.slow
async def test_an_unhealthy_node_is_replaced_after_its_toleration(virtual: cluster.EmulatedCluster) -> None:
    clock = virtual.clock
    assert isinstance(clock, autojump.AutojumpClock)
    async with controlplane.ControlPlane(virtual, REPAIRING):
        claims = await three_nodes(virtual)
        sick = claims[0]
        await hardware_fault(virtual, sick["status"]["nodeName"])
        faulted = clock.now()

        async def replaced() -> list[dict[str, Any]] | None:
            names = {c["metadata"]["name"] for c in await support.claims(virtual)}
            bound = await support.all_bound(virtual, "spread", 3)
            return bound if sick["metadata"]["name"] not in names and len(names) == 3 else None

        await support.eventually(replaced, within=90, what="the unhealthy node replaced")
        took = clock.now() - faulted
    assert took >= TOLERATION
    assert took <= TOLERATION + 120.0  # a 10 s repair poll, the drain and a new node's boot
    assert support.instance_id(sick) not in await support.running_instances(virtual)
    others = {c["metadata"]["name"] for c in claims[1:]}
    assert others <= {c["metadata"]["name"] for c in await support.claims(virtual)}


@pytest.mark.slow
async def test_no_repair_when_more_than_twenty_percent_are_unhealthy(virtual: cluster.EmulatedCluster) -> None:
    clock = virtual.clock
    async with controlplane.ControlPlane(virtual, REPAIRING):
        claims = await three_nodes(virtual)
        sick = [c["status"]["nodeName"] for c in claims[:2]]
        for name in sick:
            await hardware_fault(virtual, name)
        await clock.sleep(TOLERATION + 3 * 60.0)  # well past the toleration, on the virtual clock
        after = {c["metadata"]["name"] for c in await support.claims(virtual)}

        async def warned() -> set[str] | None:
            found, _ = await virtual.client.list(resources.EVENTS, namespace="default")
            about = {
                str(e["involvedObject"]["name"])
                for e in found
                if e.get("reason") == "NodeRepairBlocked" and e.get("type") == "Warning"
            }
            return about if about >= set(sick) else None

        await support.eventually(warned, within=30, what="NodeRepairBlocked warnings on both unhealthy nodes")
    assert after == {c["metadata"]["name"] for c in claims}
