"""A capacity block's end, end to end on one self-driving virtual clock: a pod lands on a node in the block (the
reservation is the cheapest capacity), 40 minutes before the block ends karpy deletes that NodeClaim -- not a
second earlier -- and the pod moves to an on-demand node, the block (now `expiring`) taking no replacement; the
instance is terminated before EC2 would reclaim it at the end (aws: capacityreservation/expiration)."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import autojump, cluster, controlplane, workloads
from karpy_emulator.aws import emulated_reservations, seeding

PRE_DRAIN = 40 * 60.0
LEAD = 10 * 60.0


pytestmark = pytest.mark.cluster(boot_delay=5.0, interval=5.0)


def _block(zone: str, end: float) -> dict[str, object]:
    return {
        "CapacityReservationId": "cr-0block",
        "AvailabilityZone": zone,
        "InstanceType": "m5.large",
        "OwnerId": seeding.ACCOUNT_ID,
        "InstanceMatchCriteria": "targeted",
        "State": "active",
        "ReservationType": "capacity-block",
        "AvailableInstanceCount": 1,
        "TotalInstanceCount": 1,
        "EndDate": datetime.datetime.fromtimestamp(end, tz=datetime.UTC),
    }


@pytest.mark.slow
async def test_a_capacity_block_node_drains_40_minutes_before_the_block_ends(
    emulated: cluster.EmulatedCluster,
) -> None:
    clock = emulated.clock
    assert isinstance(clock, autojump.AutojumpClock)
    assert emulated.seeded is not None
    # Ten minutes of room before the pre-drain: time to bind, and to see nothing happen early, on fewer ticks.
    end = float(int(clock.now() + PRE_DRAIN + LEAD))  # whole seconds, as the status's endTime keeps it
    block = emulated_reservations.CapacityReservations([_block((await support.zones(emulated))[0], end)])
    nodeclass = support.demo.nodeclass_manifest(role=emulated.seeded.node_role, discovery=emulated.cluster_name)
    nodeclass["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-0block"}]
    body = support.pool(consolidate_after="Never")
    for req in body["spec"]["template"]["spec"]["requirements"]:
        if req["key"] == labels.LABEL_CAPACITY_TYPE:
            req["values"] = ["reserved", "on-demand"]
    await emulated.client.create(resources.EC2NODECLASSES, nodeclass)
    await emulated.client.create(resources.NODEPOOLS, body)

    # No SQS long poll: it would hold the virtual clock still while it waits.
    plane = controlplane.ControlPlane(emulated, dataclasses.replace(support.FAST, interruption=False))
    assert plane.provider is not None
    block.install(plane.provider._deps.aws.ec2)
    async with plane:
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("trainer", 1, cpu="500m"))
        await support.eventually(
            lambda: support.all_bound(emulated, "trainer", 1), clock=clock, within=120, what="trainer bound"
        )
        (claim,) = await support.claims(emulated)
        claim_labels = claim["metadata"]["labels"]
        assert claim_labels[labels.LABEL_CAPACITY_TYPE] == "reserved"
        assert claim_labels[labels.LABEL_CAPACITY_RESERVATION_ID] == "cr-0block"
        assert claim_labels[labels.LABEL_CAPACITY_RESERVATION_TYPE] == "capacity-block"
        in_block = support.instance_id(claim)
        assert block.instances == {in_block: "cr-0block"}

        deleted_at: list[float] = []

        async def claim_deleting() -> bool:
            got = await emulated.client.get(resources.NODECLAIMS, claim["metadata"]["name"])
            if got is None or got["metadata"].get("deletionTimestamp"):
                deleted_at.append(clock.now())
                return True
            return False

        # Virtual seconds: the pre-drain comes LEAD seconds after the start; checked at the stand-ins' 5 s tick.
        await support.eventually(
            claim_deleting, clock=clock, within=LEAD + 60, every=5.0, what="the block's NodeClaim deleted"
        )
        assert end - PRE_DRAIN <= deleted_at[0] < end - PRE_DRAIN + 60  # at the pre-drain, not before

        async def moved_on_demand() -> bool:
            pods = await support.all_bound(emulated, "trainer", 1)
            claims = await support.claims(emulated)
            return bool(
                pods
                and [c["metadata"]["labels"][labels.LABEL_CAPACITY_TYPE] for c in claims] == ["on-demand"]
                and in_block not in await support.running_instances(emulated)
            )

        await support.eventually(
            moved_on_demand, clock=clock, within=PRE_DRAIN, what="the pod on an on-demand node, the block's gone"
        )
        assert clock.now() < end  # all of it before EC2 reclaims the block
        assert set(block.instances) == {in_block}  # nothing else launched into the expiring block
