"""The provider's launches, describes and terminations merge across concurrent NodeClaims (moto, virtual time).

The provider runs on an autojump clock: time jumps to the next batch window's close only once no call is in
flight, so every launch that is on its way has reached the batcher by then, however slow the machine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests import builders
from tests.cloudprovider.aws import moto_fixtures
from tests.cloudprovider.aws.moto_fixtures import NodeClasses

from karpy.api import labels
from karpy.cloudprovider.aws import clients, instances, provider
from karpy_emulator import autojump
from karpy_emulator.aws import seeding

ONE_SHAPE = (
    builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large", "c5.large"),
    builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
)


@pytest.fixture
async def batching(
    aws: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock, nodeclasses: NodeClasses
) -> provider.AWSCloudProvider:
    return await moto_fixtures.ready_provider_on(aws, jumping, seeded=seeded, nodeclasses=nodeclasses)


def claims(count: int) -> list[Any]:
    return [builders.parsed_nodeclaim(name=f"default-{i:05d}", requirements=ONE_SHAPE) for i in range(count)]


def calls_of(aws: clients.Clients, before: dict[tuple[str, str], int]) -> dict[str, int]:
    now = aws.calls.calls()
    return {op: n - before.get(("ec2", op), 0) for (service, op), n in now.items() if n > before.get(("ec2", op), 0)}


async def test_launches_of_one_shape_are_one_create_fleet_and_their_deletes_one_describe_and_one_terminate(
    batching: provider.AWSCloudProvider, aws: clients.Clients
) -> None:
    before = aws.calls.calls()
    created = await asyncio.gather(*(batching.create(c) for c in claims(6)))
    assert len({c.status.provider_id for c in created}) == 6
    launched = calls_of(aws, before)
    assert launched["CreateFleet"] == 1
    # and their launch template is made once: one hydrating describe, one by name, one create
    assert (launched["DescribeLaunchTemplates"], launched["CreateLaunchTemplate"]) == (2, 1)
    sizes = aws.calls.batches()["create_fleet"].sizes
    assert (sizes.count, sizes.total) == (1, 6)

    before = aws.calls.calls()
    await asyncio.gather(*(batching.delete(c) for c in created))
    deleted = calls_of(aws, before)
    assert (deleted["DescribeInstances"], deleted["TerminateInstances"]) == (1, 1)
    states = await asyncio.gather(
        *(batching.batchers.describe_instance(instances.parse_provider_id(c.status.provider_id)) for c in created)
    )
    assert {s["State"]["Name"] for s in states if s} <= {"shutting-down", "terminated"}


def _capacity_error(instance_type: str, zone: str) -> dict[str, Any]:
    return {
        "ErrorCode": "InsufficientInstanceCapacity",
        "ErrorMessage": "no capacity",
        "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": instance_type, "AvailabilityZone": zone}},
    }


async def test_a_merged_fleets_capacity_errors_are_marked_once_and_its_unfulfilled_launches_retry(
    batching: provider.AWSCloudProvider, aws: clients.Clients
) -> None:
    fleets: list[int] = []

    def first_fleet_falls_short(params: dict[str, Any], **_: Any) -> None:
        fleets.append(params["TargetCapacitySpecification"]["TotalTargetCapacity"])
        if len(fleets) == 1:  # EC2 finds room for 3 of the 5 ...
            params["TargetCapacitySpecification"]["TotalTargetCapacity"] = 3

    def and_says_why(parsed: dict[str, Any], **_: Any) -> None:
        if len(fleets) == 1:  # ... and c5.large had none in two zones
            parsed["Errors"] = [_capacity_error("c5.large", "us-east-1a"), _capacity_error("c5.large", "us-east-1b")]

    aws.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", first_fleet_falls_short)
    aws.ec2.meta.events.register("after-call.ec2.CreateFleet", and_says_why)
    seq = batching.unavailable.seq
    created = await asyncio.gather(*(batching.create(c) for c in claims(5)))
    assert len({c.status.provider_id for c in created}) == 5
    assert fleets == [5, 2]  # the two left over retried together, without the refused offerings
    assert batching.unavailable.is_unavailable("c5.large", "us-east-1a", labels.CAPACITY_TYPE_ON_DEMAND)
    assert batching.unavailable.is_unavailable("c5.large", "us-east-1b", labels.CAPACITY_TYPE_ON_DEMAND)
    # two offerings marked once each, not once per caller of the merged fleet that saw the errors
    assert batching.unavailable.seq - seq == 2
