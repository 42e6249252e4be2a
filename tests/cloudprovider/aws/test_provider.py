"""AWSCloudProvider against moto: launch, get/list/delete, tagging, drift, capacity errors, throttling, clean-up."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore import awsrequest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, Clock, NodeClasses

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import errors, types
from karpy.cloudprovider.aws import cache, clients, instances, provider, templates
from karpy_emulator.aws import seeding

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]
SMALL = (
    builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large", "m5.xlarge", "c5.large"),
    builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
)


def _instance(instance_id: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    return dict(ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0])


async def test_create_launches_one_tagged_instance_and_resolves_the_claim(ready: Ready) -> None:
    aws_provider, nc = ready
    claim = builders.parsed_nodeclaim(requirements=SMALL, requests={labels.RESOURCE_CPU: "1500m"})
    created = await aws_provider.create(claim)
    instance_id = instances.parse_provider_id(created.status.provider_id)
    instance = _instance(instance_id)
    assert instance["InstanceType"] in {"m5.large", "m5.xlarge", "c5.large"}
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == instance["InstanceType"]
    assert created.metadata.labels[labels.LABEL_CAPACITY_TYPE] == "on-demand"
    assert created.metadata.labels[labels.LABEL_ZONE] == instance["Placement"]["AvailabilityZone"]
    assert created.status.provider_id == f"aws:///{instance['Placement']['AvailabilityZone']}/{instance_id}"
    standard = next(a.id for a in nc.status.amis if "x86_64-standard" in a.name)
    assert instance["ImageId"] == standard == created.status.image_id
    assert created.status.allocatable[labels.RESOURCE_CPU] >= 1500
    tags = clients.tags_of(instance)
    assert tags["kubernetes.io/cluster/test-cluster"] == "owned"
    assert tags["eks:eks-cluster-name"] == CLUSTER
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == nc.name
    # Not in the CreateFleet (merged launches send identical requests), but written as the launch hands the instance
    # out, before the providerID is (`adoption`); upstream writes it after registration.
    assert tags["karpenter.sh/nodeclaim"] == claim.name


async def test_cheapest_type_goes_first_and_subnet_is_the_zones_emptiest(ready: Ready) -> None:
    aws_provider, _ = ready
    captured: list[dict[str, Any]] = []
    aws_provider._deps.aws.ec2.meta.events.register(  # the provider's own client
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else captured.append(params),
    )
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    overrides = captured[0]["LaunchTemplateConfigs"][0]["Overrides"]
    # moto fills from the first override; the builder orders cheapest first (c5.large < m5.large < m5.xlarge)
    assert overrides[0]["InstanceType"] == "c5.large"
    assert captured[0]["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert len({o["AvailabilityZone"] for o in overrides}) == 3


async def test_get_list_delete_by_provider_id(ready: Ready) -> None:
    aws_provider, _ = ready
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    got = await aws_provider.get(created.status.provider_id)
    assert got.name == created.name  # named by the tag the launch wrote (`adoption`)
    assert got.metadata.labels[labels.LABEL_NODEPOOL] == "default"
    assert got.status.capacity == created.status.capacity
    assert [c.status.provider_id for c in await aws_provider.list()] == [created.status.provider_id]
    await aws_provider.delete(created)
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.get(created.status.provider_id)
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.delete(created)
    assert list(await aws_provider.list()) == []
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.get("aws:///us-east-1a/i-0123456789abcdef0")


async def test_tag_registered_adds_name_and_nodeclaim(ready: Ready) -> None:
    aws_provider, _ = ready
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    await aws_provider.tag_registered(created, node_name="ip-10-0-0-1.ec2.internal")
    tags = clients.tags_of(_instance(instances.parse_provider_id(created.status.provider_id)))
    assert tags["Name"] == "ip-10-0-0-1.ec2.internal"
    assert tags["karpenter.sh/nodeclaim"] == created.name


async def test_missing_or_unready_node_class(ready: Ready, nodeclasses: NodeClasses) -> None:
    aws_provider, nc = ready
    with pytest.raises(errors.InsufficientCapacity):
        await aws_provider.create(builders.parsed_nodeclaim(node_class="nope", requirements=[]))
    nodeclasses.items[nc.name] = dataclasses.replace(nc, metadata=dataclasses.replace(nc.metadata, generation=2))
    with pytest.raises(errors.NodeClassNotReady):
        await aws_provider.create(builders.parsed_nodeclaim(requirements=[]))


async def test_no_compatible_type_is_insufficient_capacity(ready: Ready) -> None:
    aws_provider, _ = ready
    claim = builders.parsed_nodeclaim(
        requirements=(builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "no-such.type"),)
    )
    with pytest.raises(errors.InsufficientCapacity):
        await aws_provider.create(claim)


def _install_ice(ec2: Any, refuse: Callable[[dict[str, Any]], bool], calls: list[list[str]]) -> None:
    """Answer CreateFleet with capacity errors for the overrides `refuse` picks (before-call); else moto launches."""
    last: dict[str, Any] = {}

    def capture(params: dict[str, Any], **_: Any) -> None:
        last["params"] = params  # API-shaped params; before-call only sees the serialised request

    def answer(**_: Any) -> Any:
        overrides = [o for c in last["params"]["LaunchTemplateConfigs"] for o in c["Overrides"]]
        calls.append([o["InstanceType"] for o in overrides])
        refused = [o for o in overrides if refuse(o)]
        if not refused:
            return None  # let moto launch
        body = {
            "FleetId": "fleet-ice",
            "Instances": [],
            "Errors": [
                {
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "no capacity",
                    "Lifecycle": "on-demand",
                    "LaunchTemplateAndOverrides": {"Overrides": o},
                }
                for o in refused
            ],
        }
        return awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None), body

    ec2.meta.events.register("provide-client-params.ec2.CreateFleet", capture)
    ec2.meta.events.register("before-call.ec2.CreateFleet", answer)


async def test_capacity_errors_mark_offerings_unavailable_and_retry_with_the_rest(ready: Ready) -> None:
    aws_provider, _ = ready
    calls: list[list[str]] = []
    # c5.large is refused in every zone: the retry must launch from the rest.
    _install_ice(aws_provider._deps.aws.ec2, lambda o: o["InstanceType"] == "c5.large", calls)
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"
    assert "c5.large" in calls[0]
    assert "c5.large" not in calls[1]
    assert all(
        aws_provider.unavailable.is_unavailable("c5.large", z, "on-demand") for z in ("us-east-1a", "us-east-1b")
    )


async def test_everything_refused_is_insufficient_capacity_and_expires_after_3_minutes(
    ready: Ready, clock: Clock
) -> None:
    aws_provider, _ = ready
    calls: list[list[str]] = []
    _install_ice(aws_provider._deps.aws.ec2, lambda o: True, calls)
    with pytest.raises(errors.InsufficientCapacity) as refused:
        await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    assert len(calls) == 1  # one fleet call refused everything; nothing was left to retry with
    # EC2's code and message, once however many overrides it refused (upstream's combineFleetErrors)
    assert str(refused.value).endswith(", with fleet error(s), InsufficientInstanceCapacity: no capacity")
    clock.step(181)
    pool_types = await aws_provider.instance_types(builders.parsed_nodepool(requirements=[]))
    m5 = next(t for t in pool_types if t.name == "m5.large")
    assert all(o.available for o in m5.offerings)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


async def test_throttling_is_retried_by_botocore_then_succeeds(ready: Ready) -> None:
    aws_provider, _ = ready
    attempts: list[str] = []

    def throttle_once(request: Any, **_: Any) -> Any:
        attempts.append(request.url)
        if len(attempts) > 1:
            return None
        body = (
            b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>slow down</Message></Error>"
            b"</Errors><RequestID>r</RequestID></Response>"
        )
        return awsrequest.AWSResponse(request.url, 503, {}, _Raw(body))

    # before-send sits inside botocore's retry loop, so this exercises the adaptive retry configuration.
    aws_provider._deps.aws.ec2.meta.events.register("before-send.ec2.CreateFleet", throttle_once)
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    assert len(attempts) == 2
    assert created.status.provider_id


async def test_drift_on_ami_subnet_and_security_group_changes(ready: Ready, nodeclasses: NodeClasses) -> None:
    aws_provider, nc = ready
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    instance = _instance(instances.parse_provider_id(created.status.provider_id))
    # The emulator applies the launch template's groups, as EC2 does: a fresh instance is not drifted.
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == [g.id for g in nc.status.security_groups]
    assert await aws_provider.is_drifted(created) is None
    new_ami = dataclasses.replace(nc.status, amis=(ec2nodeclass.AMIStatus("ami-00000000000000000"),))
    nodeclasses.items[nc.name] = dataclasses.replace(nc, status=new_ami)
    assert await aws_provider.is_drifted(created) == types.DriftReason.AMI
    other_subnets = tuple(s for s in nc.status.subnets if s.id != instance["SubnetId"])
    nodeclasses.items[nc.name] = dataclasses.replace(nc, status=dataclasses.replace(nc.status, subnets=other_subnets))
    assert await aws_provider.is_drifted(created) == types.DriftReason.SUBNET
    more_groups = (*nc.status.security_groups, ec2nodeclass.SecurityGroupStatus("sg-0000000000000000e"))
    nodeclasses.items[nc.name] = dataclasses.replace(
        nc, status=dataclasses.replace(nc.status, security_groups=more_groups)
    )
    assert await aws_provider.is_drifted(created) == types.DriftReason.SECURITY_GROUP


async def test_finalizing_a_node_class_deletes_its_launch_templates_and_instance_profile(ready: Ready) -> None:
    aws_provider, nc = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    names = [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]]
    assert names
    assert all(n.startswith("karpenter.k8s.aws/") for n in names)
    await aws_provider.finalize_nodeclass(nc)
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_instance_profile(InstanceProfileName=nc.status.instance_profile)


async def test_launch_template_deleted_when_its_cache_entry_expires(ready: Ready, clock: Clock) -> None:
    aws_provider, _ = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    # one template per (AMI, pod density): m5.xlarge fits more pods than the two larges
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 2
    clock.step(61)
    await aws_provider.launch_templates.evict_expired()
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []


async def test_unmatched_selectors_make_the_node_class_not_ready_with_a_message(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider]
) -> None:
    nc = make_nodeclass(discovery="someone-else", role=seeded.node_role)
    resolved = await make_provider().reconcile_nodeclass(nc)
    conds = {c.type: c for c in resolved.conditions}
    assert conds["SubnetsReady"].status == "False"
    assert (
        conds["SubnetsReady"].message
        == "no subnets matched selector terms [{tags: {'karpenter.sh/discovery': 'someone-else'}}]"
    )
    assert conds["Ready"].status == "False"


async def test_a_restarted_provider_reuses_the_clusters_launch_templates(
    ready: Ready, make_provider: Callable[..., provider.AWSCloudProvider], clock: Clock
) -> None:
    first, _ = ready
    await first.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    existing = sorted(t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"])
    restarted = make_provider()
    calls: list[tuple[str, dict[str, Any]]] = []
    restarted._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.*", lambda params, model, **_: calls.append((model.name, dict(params)))
    )
    await restarted.create(builders.parsed_nodeclaim(name="default-second", requirements=SMALL))
    # One tag-filtered listing at start-up, then no per-name describe and no create: the templates were reused.
    lt_calls = [(name, params) for name, params in calls if "LaunchTemplate" in name]
    assert [name for name, _ in lt_calls] == ["DescribeLaunchTemplates"]
    assert lt_calls[0][1]["Filters"] == [{"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}]
    assert sorted(t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]) == existing
    # Hydrated templates expire like created ones: unused for a minute, they are deleted.
    clock.step(61)
    await restarted.launch_templates.evict_expired()
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []


async def test_launches_in_flight_spread_over_a_zones_subnets(
    ready: Ready, seeded: seeding.Seeded, nodeclasses: NodeClasses, clock: Clock
) -> None:
    aws_provider, nc = ready
    ec2 = boto3.client("ec2", region_name=REGION)
    # Two equal new subnets in a zone no other test uses: the larger id wins the tie for the first launch.
    discovery = [{"ResourceType": "subnet", "Tags": [{"Key": seeding.DISCOVERY_TAG, "Value": CLUSTER}]}]
    created_subnets = [
        ec2.create_subnet(
            VpcId=seeded.vpc_id, CidrBlock=cidr, AvailabilityZone="us-east-1d", TagSpecifications=discovery
        )["Subnet"]
        for cidr in ("10.0.200.0/24", "10.0.201.0/24")
    ]
    ids = sorted(s["SubnetId"] for s in created_subnets)
    try:
        assert len({s["AvailableIpAddressCount"] for s in created_subnets}) == 1
        clock.step(cache.DEFAULT_TTL)  # the next status refresh, a minute on, sees the new subnets
        nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
        nodeclasses.items[nc.name] = nc
        in_zone_d = (
            builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
            builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
            builders.requirement(labels.LABEL_ZONE, "In", "us-east-1d"),
        )
        subnets_used = []
        for name in ("default-one", "default-two"):
            created = await aws_provider.create(builders.parsed_nodeclaim(name=name, requirements=in_zone_d))
            subnets_used.append(_instance(instances.parse_provider_id(created.status.provider_id))["SubnetId"])
        # m5.large runs 29 pods: the first launch's claim on its subnet sends the second to the other one.
        assert subnets_used == [ids[1], ids[0]]
        # Both claims stand until the subnets are described again, which then reports the real counts.
        assert aws_provider.resolver.inflight_ips() == {ids[1]: 29, ids[0]: 29}
        await aws_provider.resolver.subnets(nc, fresh=True)
        assert aws_provider.resolver.inflight_ips() == {}
    finally:
        live = [
            i["InstanceId"]
            for r in ec2.describe_instances(Filters=[{"Name": "subnet-id", "Values": ids}])["Reservations"]
            for i in r["Instances"]
        ]
        if live:
            ec2.terminate_instances(InstanceIds=live)
        for subnet_id in ids:
            ec2.delete_subnet(SubnetId=subnet_id)


async def test_a_status_refresh_within_the_minute_calls_aws_once(ready: Ready, clock: Clock) -> None:
    aws_provider, nc = ready
    calls: list[str] = []
    for service in ("ec2", "iam", "ssm", "eks"):
        getattr(aws_provider._deps.aws, service).meta.events.register(
            f"before-call.{service}", lambda model, **_: calls.append(model.name)
        )
    # A reconcile the class's own status write triggers, or another class with the same selectors: all cached.
    again = await aws_provider.reconcile_nodeclass(nc)
    assert calls == []
    assert again.subnets == nc.status.subnets
    # The next periodic refresh, a minute on, describes afresh (the instance profile keeps its 15-minute TTL).
    clock.step(cache.DEFAULT_TTL)
    await aws_provider.reconcile_nodeclass(nc)
    assert sorted(calls) == ["DescribeImages", "DescribeSecurityGroups", "DescribeSubnets"]


async def test_the_janitor_deletes_templates_no_launch_used_for_a_minute(ready: Ready, clock: Clock) -> None:
    aws_provider, _ = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 2
    swept = asyncio.Event()
    naps: list[float] = []

    async def sleep(seconds: float) -> None:
        """The injected clock's sleep: the first nap moves time on; the second one waits to be cancelled."""
        naps.append(seconds)
        if len(naps) == 1:
            clock.step(seconds)
            return
        swept.set()
        await asyncio.Event().wait()

    janitor = asyncio.create_task(aws_provider.launch_templates.run_janitor(sleep=sleep))
    try:
        await swept.wait()
    finally:
        janitor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await janitor
    # No launch since: both templates outlived the 1-minute TTL and were deleted without one.
    assert naps == [templates.JANITOR_INTERVAL, templates.JANITOR_INTERVAL]
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []


async def test_a_template_ec2_refused_to_delete_is_retried_by_the_next_sweep(ready: Ready, clock: Clock) -> None:
    aws_provider, _ = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    asked: list[str] = []

    def refuse_the_first(**_: Any) -> Any:
        if len(asked) > 1:
            return None
        error = {"Error": {"Code": "UnauthorizedOperation", "Message": "denied"}, "ResponseMetadata": {}}
        return awsrequest.AWSResponse("http://127.0.0.1/", 403, {}, None), error

    events = aws_provider._deps.aws.ec2.meta.events
    events.register(
        "provide-client-params.ec2.DeleteLaunchTemplate", lambda params, **_: asked.append(params["LaunchTemplateName"])
    )
    events.register("before-call.ec2.DeleteLaunchTemplate", refuse_the_first)
    clock.step(cache.DEFAULT_TTL)
    deleted = await aws_provider.launch_templates.evict_expired()
    refused = asked[:1]
    assert deleted == asked[1:]
    assert [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]] == refused
    clock.step(cache.DEFAULT_TTL)
    assert await aws_provider.launch_templates.evict_expired() == refused
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []


async def test_a_dry_run_resolves_a_node_class_without_creating_its_instance_profile(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], caplog: pytest.LogCaptureFixture
) -> None:
    iam = boto3.client("iam", region_name=REGION)
    before = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    with caplog.at_level(logging.INFO):
        resolved = await make_provider(dry_run=True).reconcile_nodeclass(nc)
    assert resolved.subnets  # everything a decision reads is resolved
    assert resolved.instance_profile  # under the name it would have
    assert {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]} == before
    assert "dry run: would create instance profile" in caplog.messages
    real = await make_provider().reconcile_nodeclass(nc)  # and for real, the same name is created
    assert real.instance_profile == resolved.instance_profile
    iam.get_instance_profile(InstanceProfileName=real.instance_profile)


async def test_known_instances_are_read_from_the_cache_that_list_refreshes(ready: Ready) -> None:
    """Upstream's instance cache: gets and drift checks of a known instance cost no call; deletes describe afresh;
    the garbage collector's list drops what EC2 no longer lists."""
    aws_provider, _ = ready
    calls = aws_provider._deps.aws.calls
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))

    def describes() -> int:
        return calls.calls().get(("ec2", "DescribeInstances"), 0)

    await aws_provider.get(created.status.provider_id)
    before = describes()
    for _ in range(3):
        await aws_provider.get(created.status.provider_id)
        await aws_provider.is_drifted(created)
    assert describes() == before

    instance_id = instances.parse_provider_id(created.status.provider_id)
    await asyncio.to_thread(boto3.client("ec2", region_name=REGION).terminate_instances, InstanceIds=[instance_id])
    await aws_provider.get(created.status.provider_id)  # stale until the next list, as upstream's
    assert [c.status.provider_id for c in await aws_provider.list()] == []
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.get(created.status.provider_id)
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.delete(created)  # describes afresh: never terminates on the cache's word
