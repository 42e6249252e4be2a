"""Injected faults reach the caller as each service's own errors, through the real SDK (moto behind it)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore import exceptions as botocore_exceptions
from tests.cloudprovider.aws import moto_fixtures

from karpy.cloudprovider.aws import clients, error_codes, faults
from karpy_emulator import autojump
from karpy_emulator.aws import seeding

REGION = moto_fixtures.REGION


@pytest.fixture
def one_try(seeded: seeding.Seeded, request: pytest.FixtureRequest) -> clients.Clients:
    return clients.build_clients(region=REGION, max_attempts=0, session=moto_fixtures.boto_session(request.config))


# One read-only call per service the controller uses, covering every botocore protocol (ec2, query, json,
# rest-json); the queue and role exist in the seeded account.
def _calls(seeded: seeding.Seeded) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("ec2", "describe_subnets", {}),
        ("iam", "get_role", {"RoleName": seeded.node_role}),
        ("ssm", "get_parameter", {"Name": next(iter(seeded.images))}),
        ("sqs", "get_queue_url", {"QueueName": seeded.queue_name}),
        ("eks", "describe_cluster", {"name": seeded.cluster_name}),
    ]


OPERATION = {
    "describe_subnets": "ec2:DescribeSubnets",
    "get_role": "iam:GetRole",
    "get_parameter": "ssm:GetParameter",
    "get_queue_url": "sqs:GetQueueUrl",
    "describe_cluster": "eks:DescribeCluster",
}


@pytest.mark.parametrize(
    ("kind", "classified"),
    [
        (faults.Kind.THROTTLED, error_codes.Kind.THROTTLED),
        (faults.Kind.SERVER_ERROR, error_codes.Kind.SERVER),
        (faults.Kind.UNAVAILABLE, error_codes.Kind.SERVER),
        (faults.Kind.UNAUTHORIZED, error_codes.Kind.UNAUTHORIZED),
    ],
)
async def test_each_protocol_gets_its_services_error_once_then_the_real_answer(
    kind: faults.Kind, classified: error_codes.Kind, one_try: clients.Clients, seeded: seeding.Seeded
) -> None:
    injected = faults.Faults()
    injected.install(one_try)
    for service, method, params in _calls(seeded):
        injected.inject({OPERATION[method]}, kind, times=1)
        client = getattr(one_try, service)
        with pytest.raises(botocore_exceptions.ClientError) as raised:
            await clients.call(client, method, **params)
        assert error_codes.classify(raised.value) is classified, (service, raised.value.response)
        assert await clients.call(client, method, **params)  # spent: the server answers again
    assert injected.hit(kind) == 5


async def test_the_sdk_retries_an_injected_fault(seeded: seeding.Seeded, request: pytest.FixtureRequest) -> None:
    one_retry = clients.build_clients(region=REGION, max_attempts=1, session=moto_fixtures.boto_session(request.config))
    injected = faults.Faults()
    injected.install(one_retry)
    injected.inject({"ec2:DescribeSubnets"}, faults.Kind.SERVER_ERROR, times=1)
    assert await clients.call(one_retry.ec2, "describe_subnets")
    assert one_retry.calls.calls() == {("ec2", "DescribeSubnets"): 1}
    assert one_retry.calls.attempts() == {("ec2", "DescribeSubnets"): 2}


async def test_a_lost_answer_was_acted_on(one_try: clients.Clients, seeded: seeding.Seeded) -> None:
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:RunInstances"}, faults.Kind.LOST, times=1)
    image = next(iter(seeded.images.values()))
    with pytest.raises(botocore_exceptions.ClientError) as raised:
        await clients.call(one_try.ec2, "run_instances", ImageId=image, InstanceType="m5.large", MinCount=1, MaxCount=1)
    assert raised.value.response["Error"]["Code"] == "InternalError"
    ec2 = boto3.client("ec2", region_name=REGION)
    running = [
        i
        for r in ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])[
            "Reservations"
        ]
        for i in r["Instances"]
    ]
    assert len(running) == 1  # the server launched it; the caller never learnt its id


async def test_a_slow_answer_takes_virtual_time_not_real_time(
    one_try: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock
) -> None:
    injected = faults.Faults(sleep=jumping.sleep, activity=jumping.activity)
    injected.install(one_try)
    injected.inject({"ec2:DescribeSubnets"}, faults.Kind.SLOW, delay=600.0)
    start = jumping.now()
    assert (await clients.call(one_try.ec2, "describe_subnets"))["Subnets"]
    # Ten virtual minutes passed while the worker thread waited, which the clock could only do because the
    # waiting thread did not count as work in flight.
    assert jumping.now() - start >= 600.0


async def test_a_call_answered_in_process_fails_where_it_is_answered(one_try: clients.Clients) -> None:
    seeding.install_fast_catalog(one_try.ec2, region=REGION, families=frozenset({"m5"}))
    injected = faults.Faults()
    injected.install(one_try, answered_in_process=seeding.FAST_CATALOG_OPERATIONS)
    injected.inject({"ec2:DescribeInstanceTypes"}, faults.Kind.THROTTLED, times=1)
    with pytest.raises(botocore_exceptions.ClientError) as raised:
        await clients.paginate(one_try.ec2, "describe_instance_types", "InstanceTypes")
    assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert await clients.paginate(one_try.ec2, "describe_instance_types", "InstanceTypes")
    assert one_try.calls.calls() == {("ec2", "DescribeInstanceTypes"): 2}
    assert one_try.calls.attempts() == {}  # neither went over HTTP
