"""Node auto repair end to end on the virtual clock (NodeRepair gate, the AWS provider's repair policies on moto):
a node whose AcceleratedHardwareReady turns False (the EKS node monitoring agent's GPU check) is replaced after its
10 minutes of toleration, its pods moving to the new node; when two of three nodes turn unhealthy (more than 20 %),
none is replaced and the nodes get NodeRepairBlocked warnings instead. The condition with the shortest toleration
keeps the virtual-time scenario short in real time; the 30-minute ones follow the same path (unit tests)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e import support

from karpy import settings
from karpy.api import decoding, labels
from karpy.kube import resources
from karpy_emulator import autojump, cluster, controlplane, workloads

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


pytestmark = pytest.mark.cluster(boot_delay=5.0, interval=2.0)


async def three_nodes(emulated: cluster.EmulatedCluster) -> list[dict[str, Any]]:
    await support.apply_defaults(emulated, support.pool(consolidate_after="Never"))
    await emulated.client.create(
        workloads.DEPLOYMENTS, support.deployment("spread", 3, cpu="500m", spec_extra=ONE_PER_HOST)
    )
    await support.eventually(
        lambda: support.all_bound(emulated, "spread", 3), clock=emulated.clock, within=45, what="spread bound"
    )
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
async def test_an_unhealthy_node_is_replaced_after_its_toleration(emulated: cluster.EmulatedCluster) -> None:
    clock = emulated.clock
    assert isinstance(clock, autojump.AutojumpClock)
    async with controlplane.ControlPlane(emulated, REPAIRING):
        claims = await three_nodes(emulated)
        sick = claims[0]
        await hardware_fault(emulated, sick["status"]["nodeName"])
        faulted = clock.now()

        async def replaced() -> list[dict[str, Any]] | None:
            names = {c["metadata"]["name"] for c in await support.claims(emulated)}
            bound = await support.all_bound(emulated, "spread", 3)
            return bound if sick["metadata"]["name"] not in names and len(names) == 3 else None

        await support.eventually(
            replaced, clock=emulated.clock, within=TOLERATION + 180.0, what="the unhealthy node replaced"
        )
        took = clock.now() - faulted
    assert took >= TOLERATION
    assert took <= TOLERATION + 120.0  # a 10 s repair poll, the drain and a new node's boot
    assert support.instance_id(sick) not in await support.running_instances(emulated)
    others = {c["metadata"]["name"] for c in claims[1:]}
    assert others <= {c["metadata"]["name"] for c in await support.claims(emulated)}


@pytest.mark.slow
async def test_no_repair_when_more_than_twenty_percent_are_unhealthy(emulated: cluster.EmulatedCluster) -> None:
    clock = emulated.clock
    async with controlplane.ControlPlane(emulated, REPAIRING):
        claims = await three_nodes(emulated)
        sick = [c["status"]["nodeName"] for c in claims[:2]]
        for name in sick:
            await hardware_fault(emulated, name)
        await clock.sleep(TOLERATION + 3 * 60.0)  # well past the toleration, on the virtual clock
        after = {c["metadata"]["name"] for c in await support.claims(emulated)}

        async def warned() -> set[str] | None:
            found, _ = await emulated.client.list(resources.EVENTS, namespace="default")
            about = {
                str(e["involvedObject"]["name"])
                for e in found
                if e.get("reason") == "NodeRepairBlocked" and e.get("type") == "Warning"
            }
            return about if about >= set(sick) else None

        await support.eventually(
            warned, clock=emulated.clock, within=30, what="NodeRepairBlocked warnings on both unhealthy nodes"
        )
    assert after == {c["metadata"]["name"] for c in claims}
