"""Registered instances get their node's and NodeClaim's names as tags, after registration (moto, manual time)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import boto3
import pytest
from tests import builders
from tests.cloudprovider.aws import moto_fixtures

from karpy.api import nodeclaim
from karpy.cloudprovider.aws import clients, ec2batch, faults, instances, tagging
from karpy_emulator import autojump
from karpy_emulator.aws import seeding


def _launch(seeded: seeding.Seeded, count: int) -> list[str]:
    ec2 = boto3.client("ec2", region_name=moto_fixtures.REGION)
    image = next(iter(seeded.images.values()))
    reply = ec2.run_instances(ImageId=image, InstanceType="m5.large", MinCount=count, MaxCount=count)
    return [str(i["InstanceId"]) for i in reply["Instances"]]


def _tags(instance_id: str) -> dict[str, str]:
    ec2 = boto3.client("ec2", region_name=moto_fixtures.REGION)
    found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return clients.tags_of(found)


def _registered(name: str, instance_id: str, node: str = "") -> nodeclaim.NodeClaim:
    claim = builders.parsed_nodeclaim(
        name=name, provider_id=instances.provider_id("us-east-1a", instance_id), requirements=[]
    )
    return dataclasses.replace(claim, status=dataclasses.replace(claim.status, node_name=node))


@pytest.fixture
def one_try(seeded: seeding.Seeded, request: pytest.FixtureRequest) -> clients.Clients:
    return clients.build_clients(
        region=moto_fixtures.REGION, max_attempts=0, session=moto_fixtures.boto_session(request.config)
    )


def tagger_for(
    aws: clients.Clients, manual: autojump.AutojumpClock, claims: Callable[[], list[nodeclaim.NodeClaim]]
) -> tagging.Tagger:
    batchers = ec2batch.EC2Batchers(
        aws=aws, now=manual.now, sleep=manual.sleep, windows=ec2batch.Windows(), owned=moto_fixtures.OWNED
    )
    return tagging.Tagger(
        aws=aws,
        batchers=batchers,
        cluster_name=moto_fixtures.CLUSTER,
        nodeclaims=claims,
        sleep=manual.sleep,
        retagged=lambda _instance, _tags: None,  # the provider's instance cache, which these tests do not hold
    )


async def test_registered_claims_are_tagged_once_one_create_tags_a_second(
    one_try: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock
) -> None:
    manual = jumping
    ids = _launch(seeded, 3)
    claims = [_registered(f"default-{i}", instance, node=f"ip-10-0-0-{i}") for i, instance in enumerate(ids)]
    claims.append(_registered("default-unregistered", _launch(seeded, 1)[0]))  # no node yet: left alone
    tagger = tagger_for(one_try, manual, lambda: claims)

    start = manual.now()
    assert await tagger.tag_pass() == 3
    assert manual.now() - start >= 3 * tagging.CREATE_TAGS_INTERVAL  # paced as upstream
    for i, instance in enumerate(ids):
        assert _tags(instance) == {"Name": f"ip-10-0-0-{i}", "karpenter.sh/nodeclaim": f"default-{i}"} | {
            "eks:eks-cluster-name": moto_fixtures.CLUSTER
        }
    calls = one_try.calls.calls()
    assert (calls[("ec2", "DescribeInstances")], calls[("ec2", "CreateTags")]) == (1, 3)  # one merged describe

    assert await tagger.tag_pass() == 0  # remembered: no call at all
    assert one_try.calls.calls() == calls

    restarted = tagger_for(one_try, manual, lambda: claims)
    assert await restarted.tag_pass() == 0  # a restart describes once and finds the tags there
    assert one_try.calls.calls()[("ec2", "CreateTags")] == 3


async def test_a_refused_create_tags_is_retried_by_the_next_pass(
    one_try: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock
) -> None:
    manual = jumping
    (instance,) = _launch(seeded, 1)
    claims = [_registered("default-a", instance, node="ip-10-0-0-1")]
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:CreateTags"}, faults.Kind.THROTTLED, times=1)
    tagger = tagger_for(one_try, manual, lambda: claims)
    for expected in (0, 1):
        assert await tagger.tag_pass() == expected
    assert _tags(instance)["karpenter.sh/nodeclaim"] == "default-a"
