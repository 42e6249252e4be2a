"""ARC zonal shift end to end (ENABLE_ZONAL_SHIFT), on one self-driving virtual clock: the controller checks at start
that the cluster is registered, a NodePool that can only use the shifted zone gets ZonalShiftActive and launches
nothing while the shift lasts, and once ARC lifts it the pool gets ZonalShiftCleared and its pod a node in that zone
(aws: pkg/controllers/arczonalshift, instancetype/offering). The shifts come from the emulation's GetManagedResource
endpoint, the rest from moto."""

from __future__ import annotations

import asyncio
import dataclasses

import boto3
import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads
from karpy_emulator.aws import arczonalshift

pytestmark = pytest.mark.cluster(boot_delay=5.0, interval=5.0)


async def _first_zone_and_cluster_arn(emulated: cluster.EmulatedCluster) -> tuple[str, str, str]:
    def describe() -> tuple[str, str, str]:
        assert emulated.seeded is not None
        ec2 = boto3.client("ec2", region_name=emulated.region)
        subnets = ec2.describe_subnets(SubnetIds=list(emulated.seeded.subnet_ids))["Subnets"]
        first = min(subnets, key=lambda s: s["AvailabilityZone"])
        eks = boto3.client("eks", region_name=emulated.region)
        arn = eks.describe_cluster(name=emulated.cluster_name)["cluster"]["arn"]
        return first["AvailabilityZone"], first["AvailabilityZoneId"], arn

    return await asyncio.to_thread(describe)


async def _pool_event_messages(emulated: cluster.EmulatedCluster, reason: str) -> list[str]:
    items, _ = await emulated.client.list(resources.EVENTS)
    return [e["message"] for e in items if e.get("reason") == reason and e["involvedObject"]["kind"] == "NodePool"]


async def test_a_pool_confined_to_a_shifted_zone_waits_for_the_shift_to_end(
    emulated: cluster.EmulatedCluster,
) -> None:
    clock = emulated.clock
    zone, zone_id, arn = await _first_zone_and_cluster_arn(emulated)
    service = arczonalshift.ZonalShiftService()
    service.register(arn)
    service.set_shifts(arn, arczonalshift.Shift(zone_id, expiry=clock.now() + 3600.0))
    confined = support.pool(requirements=[{"key": labels.LABEL_ZONE, "operator": "In", "values": [zone]}])
    await support.apply_defaults(emulated, confined)
    with arczonalshift.serving(service) as url:
        # No SQS long poll: it would hold the virtual clock still while it waits.
        options = dataclasses.replace(support.FAST, interruption=False, zonal_shift_endpoint=url)
        async with controlplane.ControlPlane(emulated, options):
            await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("web", 1, cpu="500m"))
            active = await support.eventually(
                lambda: _pool_event_messages(emulated, "ZonalShiftActive"), clock=clock, within=60, what="active"
            )
            assert active == [
                f"Zonal shift detected: offerings in zone {zone} ({zone_id}) are unavailable for this NodePool"
            ]
            await clock.sleep(60.0)  # a minute of batches: no offering of the pool is available
            assert await support.claims(emulated) == []

            service.set_shifts(arn)  # ARC lifts the shift
            (pod,) = await support.eventually(
                lambda: support.all_bound(emulated, "web", 1), clock=clock, within=120, what="web bound"
            )
            node_by_name = {n["metadata"]["name"]: n for n in await support.nodes(emulated)}
            assert support.node_zone(node_by_name, pod) == zone
            cleared = await support.eventually(
                lambda: _pool_event_messages(emulated, "ZonalShiftCleared"), clock=clock, within=60, what="cleared"
            )
            assert cleared == [
                f"Zonal shift cleared: offerings in zone {zone} ({zone_id}) are restored for this NodePool"
            ]
    assert service.requests[0] == arn  # the start-up check asked about this cluster first
