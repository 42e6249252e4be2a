"""CreateFleet, DescribeInstances and TerminateInstances batching against moto (upstream's cases from
aws: pkg/batcher/{createfleet,describeinstances,terminateinstances}_test.go, as data in our own words).

The batchers run on a manual clock: the callers' requests are all in before the test moves time past the window,
so what merges is decided by the test, not by how fast the machine is."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import boto3
import pytest
from botocore import exceptions as botocore_exceptions
from tests.cloudprovider.aws import moto_fixtures

from karpy import clock as karpy_clock
from karpy.api import labels
from karpy.cloudprovider.aws import clients, ec2batch, faults, fleet
from karpy_emulator.aws import seeding

REGION = moto_fixtures.REGION


@pytest.fixture
def manual() -> karpy_clock.ManualClock:
    return karpy_clock.ManualClock()


@pytest.fixture
def one_try(seeded: seeding.Seeded, request: pytest.FixtureRequest) -> clients.Clients:
    """Clients without SDK retries, so an injected fault reaches the batcher on the first attempt."""
    return clients.build_clients(region=REGION, max_attempts=0, session=moto_fixtures.boto_session(request.config))


def batchers_on(aws: clients.Clients, manual: karpy_clock.ManualClock) -> ec2batch.EC2Batchers:
    return ec2batch.EC2Batchers(
        aws=aws, now=manual.now, sleep=manual.sleep, windows=ec2batch.Windows(), owned=moto_fixtures.OWNED
    )


async def together(manual: karpy_clock.ManualClock, *calls: Awaitable[Any]) -> list[Any]:
    """Start every call, let them all reach their batcher, then close every window (≤ 1 s): outcomes in order,
    exceptions returned."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    await manual.settle()
    manual.advance(1.0)
    return await asyncio.gather(*tasks, return_exceptions=True)


def _ec2() -> Any:
    return boto3.client("ec2", region_name=REGION)


def _run_instances(seeded: seeding.Seeded, count: int) -> list[str]:
    image = next(iter(seeded.images.values()))
    reply = _ec2().run_instances(
        ImageId=image, InstanceType="m5.large", MinCount=count, MaxCount=count, SubnetId=seeded.subnet_ids[0]
    )
    return [str(i["InstanceId"]) for i in reply["Instances"]]


@pytest.fixture
def template(seeded: seeding.Seeded) -> str:
    name = "karpy-batch-test"
    image = next(iter(seeded.images.values()))
    _ec2().create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": image})
    return name  # the seeded-state restore of the next test deletes it


def fleet_request(template: str, subnet: str, zone: str) -> dict[str, Any]:
    overrides = (fleet.Override("m5.large", subnet, zone, 0.096),)
    return fleet.build_create_fleet_request(
        [fleet.LaunchTemplateOverrides(template, overrides)],
        capacity_type=labels.CAPACITY_TYPE_ON_DEMAND,
        tags={"karpenter.sh/nodepool": "default"},
    )


def record_params(client: Any, operation: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    client.meta.events.register(f"provide-client-params.ec2.{operation}", lambda params, **_: seen.append(params))
    return seen


def zone_of(subnet_id: str) -> str:
    return str(_ec2().describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZone"])


def instance_ids(response: dict[str, Any]) -> list[str]:
    return [i for group in response["Instances"] for i in group["InstanceIds"]]


# --- CreateFleet -----------------------------------------------------------------------------------------------


async def test_identical_fleet_requests_are_one_call_for_their_sum(
    aws: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    batchers = batchers_on(aws, manual)
    sent = record_params(aws.ec2, "CreateFleet")
    subnet = seeded.subnet_ids[0]
    request = fleet_request(template, subnet, zone_of(subnet))
    responses = await together(manual, *(batchers.create_fleet(request, owner="") for _ in range(5)))
    assert len(sent) == 1
    assert sent[0]["TargetCapacitySpecification"]["TotalTargetCapacity"] == 5
    ids = [instance_ids(r) for r in responses]
    assert all(len(one) == 1 for one in ids)
    assert len({one[0] for one in ids}) == 5  # one instance each, none handed out twice


async def test_different_fleet_requests_are_different_calls(
    aws: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    batchers = batchers_on(aws, manual)
    sent = record_params(aws.ec2, "CreateFleet")
    first, second = seeded.subnet_ids[:2]
    east_a, east_b = fleet_request(template, first, zone_of(first)), fleet_request(template, second, zone_of(second))
    requests = [east_a, east_a, east_a, east_b, east_a]  # four for one zone, one for the other
    responses = await together(manual, *(batchers.create_fleet(r, owner="") for r in requests))
    assert sorted(s["TargetCapacitySpecification"]["TotalTargetCapacity"] for s in sent) == [1, 4]
    described = _ec2().describe_instances(InstanceIds=[instance_ids(r)[0] for r in responses])
    subnet_of = {i["InstanceId"]: i["SubnetId"] for r in described["Reservations"] for i in r["Instances"]}
    assert [subnet_of[instance_ids(r)[0]] for r in responses] == [first, first, first, second, first]


ICE_CODE = "InsufficientInstanceCapacity"
ICE = {
    "ErrorCode": ICE_CODE,
    "ErrorMessage": "no capacity",
    "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a"}},
}


def fulfil_only(ec2: Any, launched: int, errors: list[dict[str, Any]]) -> None:
    """EC2 launching fewer instances than asked for and saying why (moto always launches them all): the request
    goes to moto for `launched` instances and the answer carries `errors`."""

    def fewer(params: dict[str, Any], **_: Any) -> None:
        params["TargetCapacitySpecification"]["TotalTargetCapacity"] = launched

    def with_errors(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Errors"] = [*parsed.get("Errors", []), *errors]

    ec2.meta.events.register("provide-client-params.ec2.CreateFleet", fewer)
    ec2.meta.events.register("after-call.ec2.CreateFleet", with_errors)


async def test_partial_fulfilment_gives_instances_in_order_and_the_errors_to_every_caller(
    aws: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    batchers = batchers_on(aws, manual)
    subnet = seeded.subnet_ids[0]
    fulfil_only(aws.ec2, 3, [ICE, {**ICE, "ErrorMessage": "still none"}])
    responses = await together(
        manual, *(batchers.create_fleet(fleet_request(template, subnet, "z"), owner="") for _ in range(5))
    )
    assert [len(instance_ids(r)) for r in responses] == [1, 1, 1, 0, 0]
    assert all(len(r["Errors"]) == 2 for r in responses)  # launched or not, each caller sees why some were not
    assert len({r["FleetId"] for r in responses}) == 1


@pytest.mark.parametrize(
    ("launched", "errors", "callers", "expected"),
    [
        # (instance ids EC2 returned, its errors, callers) → (instances per caller, error codes per caller)
        (["i-1", "i-2"], [], 2, [(1, []), (1, [])]),
        (["i-1"], [], 3, [(1, []), (0, ["TooFewInstancesReturned"]), (0, ["TooFewInstancesReturned"])]),
        (["i-1"], [ICE_CODE], 2, [(1, [ICE_CODE]), (0, [ICE_CODE])]),
        ([], [ICE_CODE], 2, [(0, [ICE_CODE]), (0, [ICE_CODE])]),
        (["i-1", "i-2", "i-3"], [], 2, [(1, []), (1, [])]),  # more than asked for: the extra is nobody's
    ],
)
def test_split_fleet(launched: list[str], errors: list[str], callers: int, expected: list[Any]) -> None:
    response = {
        "FleetId": "fleet-1",
        "Errors": [{"ErrorCode": code} for code in errors],
        "Instances": [{"InstanceIds": launched, "InstanceType": "m5.large"}],
    }
    out = ec2batch.split_fleet(response, callers)
    assert [(len(instance_ids(r)), [e["ErrorCode"] for e in r["Errors"]]) for r in out] == expected
    handed = [i for r in out for i in instance_ids(r)]
    assert handed == launched[: len(handed)]


async def test_a_failed_fleet_call_fails_every_caller_once(
    one_try: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    batchers = batchers_on(one_try, manual)
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:CreateFleet"}, faults.Kind.THROTTLED)
    subnet = seeded.subnet_ids[0]
    outcomes = await together(
        manual, *(batchers.create_fleet(fleet_request(template, subnet, "z"), owner="") for _ in range(4))
    )
    assert all(isinstance(o, botocore_exceptions.ClientError) for o in outcomes)
    assert {o.response["Error"]["Code"] for o in outcomes} == {"RequestLimitExceeded"}
    assert one_try.calls.calls() == {("ec2", "CreateFleet"): 1}


async def test_only_single_instance_fleets_are_batched(aws: clients.Clients, manual: karpy_clock.ManualClock) -> None:
    request = fleet_request("t", "subnet-1", "z")
    request["TargetCapacitySpecification"]["TotalTargetCapacity"] = 2
    with pytest.raises(ec2batch.SingleInstanceOnly):
        await batchers_on(aws, manual).create_fleet(request, owner="")


# --- DescribeInstances / TerminateInstances ----------------------------------------------------------------------

Call = Callable[[ec2batch.EC2Batchers, str], Awaitable[Any]]
DESCRIBE: Call = ec2batch.EC2Batchers.describe_instance
TERMINATE: Call = ec2batch.EC2Batchers.terminate_instance
OPERATION = {DESCRIBE: "DescribeInstances", TERMINATE: "TerminateInstances"}
BY_ID = pytest.mark.parametrize("call", [DESCRIBE, TERMINATE], ids=["describe", "terminate"])


def answered_for(call: Call, outcome: Any) -> str:
    """The instance id a describe (the instance) or a terminate (its state change) answered for."""
    assert isinstance(outcome, dict), outcome
    if call is TERMINATE:
        assert outcome["CurrentState"]["Name"] in ("shutting-down", "terminated")
    return str(outcome["InstanceId"])


@BY_ID
async def test_single_id_requests_are_one_call(
    call: Call, aws: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    ids = _run_instances(seeded, 5)
    batchers = batchers_on(aws, manual)
    sent = record_params(aws.ec2, OPERATION[call])
    outcomes = await together(manual, *(call(batchers, i) for i in ids))
    assert [answered_for(call, o) for o in outcomes] == ids
    assert [sorted(s["InstanceIds"]) for s in sent] == [sorted(ids)]


@BY_ID
async def test_the_same_id_asked_for_again_is_asked_once(
    call: Call, aws: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    first, second = _run_instances(seeded, 2)
    asked = [first, first, first, second, second]
    batchers = batchers_on(aws, manual)
    sent = record_params(aws.ec2, OPERATION[call])
    outcomes = await together(manual, *(call(batchers, i) for i in asked))
    assert [answered_for(call, o) for o in outcomes] == asked
    assert [s["InstanceIds"] for s in sent] == [[first, second]]


@BY_ID
async def test_an_id_the_merged_call_fails_on_is_retried_alone_and_fails_alone(
    call: Call, aws: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    good = _run_instances(seeded, 2)
    unknown = "i-00000000000000bad"
    batchers = batchers_on(aws, manual)
    sent = record_params(aws.ec2, OPERATION[call])
    outcomes = await together(manual, *(call(batchers, i) for i in (good[0], unknown, good[1])))
    assert answered_for(call, outcomes[0]) == good[0]
    assert answered_for(call, outcomes[2]) == good[1]
    assert isinstance(outcomes[1], botocore_exceptions.ClientError)
    assert outcomes[1].response["Error"]["Code"].startswith("InvalidInstanceID")
    # the merged call (EC2 refuses it whole for one unknown id), then one call per id
    assert [len(s["InstanceIds"]) for s in sent] == [3, 1, 1, 1]


@BY_ID
@pytest.mark.parametrize("kind", [faults.Kind.THROTTLED, faults.Kind.UNAVAILABLE])
async def test_a_merged_call_throttled_or_failing_on_the_server_is_not_repeated_per_id(
    call: Call, kind: faults.Kind, one_try: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    ids = _run_instances(seeded, 3)
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({f"ec2:{OPERATION[call]}"}, kind)
    batchers = batchers_on(one_try, manual)
    outcomes = await together(manual, *(call(batchers, i) for i in ids))
    assert all(isinstance(o, botocore_exceptions.ClientError) for o in outcomes)
    assert one_try.calls.calls() == {("ec2", OPERATION[call]): 1}  # upstream would follow with one call per id


async def test_an_id_ec2_does_not_answer_for_is_described_alone(
    aws: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    """EC2 is eventually consistent: a merged describe may leave out an instance it knows (upstream's "partial")."""
    ids = _run_instances(seeded, 3)
    hidden = ids[1]
    calls: list[list[str]] = []

    def hide_in_merged_calls(parsed: dict[str, Any], **_: Any) -> None:
        if len(calls[-1]) > 1:
            for reservation in parsed.get("Reservations", []):
                reservation["Instances"] = [i for i in reservation["Instances"] if i["InstanceId"] != hidden]

    aws.ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstances", lambda params, **_: calls.append(list(params["InstanceIds"]))
    )
    aws.ec2.meta.events.register("after-call.ec2.DescribeInstances", hide_in_merged_calls)
    batchers = batchers_on(aws, manual)
    outcomes = await together(manual, *(batchers.describe_instance(i) for i in ids))
    assert [o["InstanceId"] for o in outcomes] == ids
    assert calls == [ids, [hidden]]
