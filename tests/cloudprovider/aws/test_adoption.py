"""A launch whose providerID write was lost is found again after a restart, never launched twice (moto, virtual
time).

A merged CreateFleet's ClientToken covers its whole set of owners only (`ec2batch`): relaunched alone after a
restart, a claim of a batch would get a second instance. The launch tags each instance with its claim's name before
the providerID is written, and a launch that may repeat an earlier process's (`create(adopt=True)`) looks the tag up
first: one DescribeInstances for every claim asked in its window, the names as one EC2 filter's values."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest
from botocore import exceptions as botocore_exceptions
from tests import builders
from tests.cloudprovider.aws import moto_fixtures
from tests.cloudprovider.aws import test_ec2batch as aws_test_ec2batch
from tests.cloudprovider.aws import test_foreign_instances as aws_test_foreign_instances
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, NodeClasses
from tests.nodeclaim import builders as nodeclaim_builders

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy.api import labels, nodeclaim, parse
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import clients, ec2batch, instances, provider
from karpy.kube import fake, resources
from karpy.nodeclaim import controller, lifecycle_observer, registration, written
from karpy.state import cluster as state_cluster
from karpy_emulator import autojump
from karpy_emulator.aws import seeding

OWNED = moto_fixtures.OWNED
ONE_SHAPE = [
    builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large", "c5.large"),
    builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", labels.CAPACITY_TYPE_ON_DEMAND),
]
LOST, KEPT = "default-lost", "default-kept"
manual = aws_test_ec2batch.manual


def _ec2() -> Any:
    return boto3.client("ec2", region_name=REGION)


def _live() -> list[str]:
    reply = _ec2().describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return sorted(i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"])


async def _provider(
    aws: clients.Clients, seeded: seeding.Seeded, clock: autojump.AutojumpClock, nodeclasses: NodeClasses
) -> provider.AWSCloudProvider:
    """A provider as a process starts with (its batchers, caches and instance memory empty), its node class Ready."""
    return await moto_fixtures.ready_provider_on(aws, clock, seeded=seeded, nodeclasses=nodeclasses)


def _lifecycle(
    kube: fake.FakeKubeClient,
    cloud: provider.AWSCloudProvider,
    clock: karpy_clock.ManualClock,
    *,
    leading_since: float,
) -> controller.NodeClaimController:
    def cached(name: str) -> nodeclaim.NodeClaim | None:  # an always-synced state cache
        raw = kube.obj(resources.NODECLAIMS, name)
        return None if raw is None else rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, raw, None)

    return controller.NodeClaimController(
        controller.Deps(
            client=kube,
            cloud=cloud,
            clock=clock,
            observer=lifecycle_observer.Observer(events.MemoryRecorder(clock), lifecycle_observer.Metrics()),
            rejections=rejections.Discard(),
            registration=registration.RegistrationHealth(),
            nodes_for_provider_id=lambda pid: [
                n for n in kube.all(resources.NODES) if (n.get("spec") or {}).get("providerID") == pid
            ],
            claims=cached,
            own_writes=written.Written(),
            leading_since=lambda: leading_since,
        )
    )


def _provider_id(kube: fake.FakeKubeClient, name: str) -> str:
    return str(((kube.obj(resources.NODECLAIMS, name) or {}).get("status") or {}).get("providerID") or "")


async def test_a_batched_claims_lost_provider_id_is_adopted_after_a_restart_not_launched_again(
    aws: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock, nodeclasses: NodeClasses
) -> None:
    kube = fake.FakeKubeClient(jumping)
    cache = state_cluster.Cluster(clock=jumping)
    kube.follow(cache.apply, resources.NODECLAIMS)
    created = nodeclaim_builders.ts(jumping.now())
    for name in (LOST, KEPT):
        kube.put(
            resources.NODECLAIMS,
            builders.nodeclaim(name, uid=f"uid-{name}", created=created, requirements=ONE_SHAPE, resource_version="1"),
        )
    # The providerID write of one claim of the batch never reaches the API server: the leader dies there.
    kube.crash_on = lambda w: w.subresource == "status" and w.name == LOST and "providerID" in w.body["status"]
    first = _lifecycle(kube, await _provider(aws, seeded, jumping, nodeclasses), jumping, leading_since=0.0)
    fleets = aws_test_ec2batch.record_params(aws.ec2, "CreateFleet")
    outcomes = await asyncio.gather(first.reconcile(LOST), first.reconcile(KEPT), return_exceptions=True)
    assert isinstance(outcomes[0], fake.Crash)
    launches = [f for f in fleets if not f.get("DryRun")]  # not a node class's authorization check
    assert [f["TargetCapacitySpecification"]["TotalTargetCapacity"] for f in launches] == [2]  # one merged call
    assert len(_live()) == 2
    assert _provider_id(kube, LOST) == ""

    kube.crash_on = None
    jumping.advance(15)  # the lease expires; a new process (nothing in memory) leads from now
    restarted = _lifecycle(
        kube, await _provider(aws, seeded, jumping, nodeclasses), jumping, leading_since=jumping.now()
    )
    await restarted.reconcile(LOST)
    held = sorted(instances.parse_provider_id(_provider_id(kube, n)) for n in (LOST, KEPT))
    assert held == _live()  # exactly one instance per claim: the lost one's taken over
    assert [f for f in fleets if not f.get("DryRun")] == launches  # no launch after the restart


async def test_a_claim_created_in_this_term_is_launched_without_a_lookup(
    aws: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock, nodeclasses: NodeClasses
) -> None:
    """The hot path of a scale-out: no DescribeInstances by tag per claim; the instance is tagged for later."""
    kube = fake.FakeKubeClient(jumping)
    kube.put(
        resources.NODECLAIMS,
        builders.nodeclaim(KEPT, created=nodeclaim_builders.ts(jumping.now()), requirements=ONE_SHAPE),
    )
    seen = aws_test_ec2batch.record_params(aws.ec2, "DescribeInstances")
    lifecycle = _lifecycle(
        kube, await _provider(aws, seeded, jumping, nodeclasses), jumping, leading_since=jumping.now() - 60
    )
    await lifecycle.reconcile(KEPT)
    instance_id = instances.parse_provider_id(_provider_id(kube, KEPT))
    assert not [p for p in seen if "Filters" in p and f"tag:{labels.TAG_NODECLAIM}" in str(p["Filters"])]
    tags = clients.tags_of(_ec2().describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0])
    assert tags[labels.TAG_NODECLAIM] == KEPT


# --- the batched lookup ------------------------------------------------------------------------------------------


def _run(seeded: seeding.Seeded, tags: dict[str, str]) -> str:
    return aws_test_foreign_instances.run_instance(_ec2(), seeded, tags)


async def test_instances_are_found_by_claim_name_in_one_describe_per_window(
    aws: clients.Clients, seeded: seeding.Seeded, manual: karpy_clock.ManualClock
) -> None:
    def claimed(name: str, **more: str) -> dict[str, str]:
        return {**OWNED, labels.TAG_NODEPOOL: "default", labels.TAG_NODECLAIM: name, **more}

    a = _run(seeded, claimed("a"))
    b = {_run(seeded, claimed("b")), _run(seeded, claimed("b"))}  # a leak: either is the claim's
    gone = _run(seeded, claimed("c"))
    _ec2().terminate_instances(InstanceIds=[gone])
    _run(seeded, {"kubernetes.io/cluster/other": "owned", labels.TAG_NODECLAIM: "d"})  # another cluster's claim
    batchers = ec2batch.EC2Batchers(
        aws=aws, now=manual.now, sleep=manual.sleep, windows=ec2batch.Windows(), owned=OWNED
    )
    seen = aws_test_ec2batch.record_params(aws.ec2, "DescribeInstances")
    names = ["a", "b", "c", "d", "e", "a"]
    found = await aws_test_ec2batch.together(manual, *(batchers.claimed_instance(n) for n in names))
    assert seen == [  # EC2's filter syntax: the names are one filter's values, ORed
        {
            "Filters": [
                {"Name": f"tag:{labels.TAG_NODECLAIM}", "Values": ["a", "b", "c", "d", "e"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
                {"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{CLUSTER}", "Values": ["owned"]},
            ]
        }
    ]
    ids = [None if f is None else f["InstanceId"] for f in found]
    assert ids[0] == ids[5] == a
    assert ids[1] in b
    assert ids[2:5] == [None, None, None]  # terminated; another cluster's; never launched
    await batchers.close()


async def test_a_failed_lookup_fails_every_caller_and_launches_nothing(
    aws: clients.Clients, seeded: seeding.Seeded, jumping: autojump.AutojumpClock, nodeclasses: NodeClasses
) -> None:
    """Not knowing whether an instance exists is no licence to launch another: the launch fails and is retried."""
    cloud = await _provider(aws, seeded, jumping, nodeclasses)

    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}
        raise botocore_exceptions.ClientError(error, "DescribeInstances")  # type: ignore[arg-type]

    aws.ec2.meta.events.register("before-call.ec2.DescribeInstances", refuse)
    claim = builders.parsed_nodeclaim(name=LOST, requirements=ONE_SHAPE)
    with pytest.raises(errors.CreateError) as failed:
        await cloud.create(claim, adopt=True)
    assert "RequestLimitExceeded" in str(failed.value)
    assert _live() == []
