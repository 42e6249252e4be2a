"""EC2NodeClass authorization dry runs against moto with IAM enforcement on: a controller whose policy denies
CreateLaunchTemplate, CreateFleet or RunInstances sees the class not Ready with upstream's reason; verdicts are
cached for 30 minutes; DISABLE_DRY_RUN skips the calls (aws: pkg/controllers/nodeclass/validation.go)."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import boto3
import pytest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CATALOG_FAMILIES, CLUSTER, REGION, Clock, NodeClasses

from karpy.api import ec2nodeclass
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import authorization, clients, provider
from karpy_emulator.aws import seeding

Denying = Callable[[str], clients.Clients]
Enforce = Callable[[provider.AWSCloudProvider], Awaitable[None]]


def _moto_auth(moto_url: str, count: str) -> None:
    """Turn moto's IAM enforcement on ("0": from the next request) or off ("inf")."""
    request = urllib.request.Request(
        f"{moto_url}/moto-api/reset-auth", data=count.encode(), method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def denying(seeded: seeding.Seeded, moto_url: str) -> Iterator[Denying]:
    """Clients signed by an IAM user allowed everything but the given EC2 action, with IAM enforced."""
    iam = boto3.client("iam", region_name=REGION)
    made: list[str] = []

    def build(action: str) -> clients.Clients:
        user = f"karpy-controller-{len(made)}"
        iam.create_user(UserName=user)
        made.append(user)
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "*", "Resource": "*"},
                {"Effect": "Deny", "Action": action, "Resource": "*"},
            ],
        }
        iam.put_user_policy(UserName=user, PolicyName="controller", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        session = boto3.session.Session(
            aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], region_name=REGION
        )
        built = clients.build_clients(region=REGION, max_attempts=1, session=session)
        seeding.install_fast_catalog(built.ec2, region=REGION, families=CATALOG_FAMILIES)
        return built

    try:
        yield build
    finally:
        _moto_auth(moto_url, "inf")
        for user in made:
            for key in iam.list_access_keys(UserName=user)["AccessKeyMetadata"]:
                iam.delete_access_key(UserName=user, AccessKeyId=key["AccessKeyId"])
            iam.delete_user_policy(UserName=user, PolicyName="controller")
            iam.delete_user(UserName=user)


@pytest.fixture
def enforce(moto_url: str) -> Iterator[Enforce]:
    """Turns moto's IAM enforcement on for the rest of the test, once the provider knows the cluster: moto cannot
    verify the signature of EKS requests, so DescribeCluster is answered before."""

    async def on(aws_provider: provider.AWSCloudProvider) -> None:
        await aws_provider.resolver.cluster()
        _moto_auth(moto_url, "0")

    try:
        yield on
    finally:
        _moto_auth(moto_url, "inf")


def _dry_runs(aws_provider: provider.AWSCloudProvider) -> list[str]:
    """The names of the DryRun=True calls the provider's EC2 client makes from now on."""
    seen: list[str] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("DryRun"):
            seen.append(model.name)

    aws_provider._deps.aws.ec2.meta.events.register("provide-client-params.ec2.*", record)
    return seen


async def _reconciled(
    aws_provider: provider.AWSCloudProvider, nodeclasses: NodeClasses, nc: ec2nodeclass.EC2NodeClass
) -> ec2nodeclass.EC2NodeClass:
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    return nc


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("ec2:CreateLaunchTemplate", "CreateLaunchTemplateAuthCheckFailed"),
        ("ec2:CreateFleet", "CreateFleetAuthCheckFailed"),
        ("ec2:RunInstances", "RunInstancesAuthCheckFailed"),
    ],
)
async def test_a_denied_launch_action_makes_the_class_not_ready_with_upstreams_reason(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    denying: Denying,
    enforce: Enforce,
    action: str,
    reason: str,
) -> None:
    aws_provider = make_provider(aws_clients=denying(action))
    await enforce(aws_provider)
    nc = await _reconciled(aws_provider, nodeclasses, make_nodeclass(role=seeded.node_role, discovery=CLUSTER))
    validation = nc.condition(ec2nodeclass.VALIDATION_SUCCEEDED)
    assert validation is not None
    assert (validation.status, validation.reason) == ("False", reason)
    assert validation.message.startswith(f"Controller isn't authorized to call {action}: AccessDenied: ")
    ready = nc.condition(ec2nodeclass.READY)
    assert ready is not None
    assert ready.status == "False"
    with pytest.raises(errors.NodeClassNotReady):
        await aws_provider.create(builders.parsed_nodeclaim(requirements=[]))


async def test_verdicts_are_cached_for_30_minutes_and_per_spec(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    clock: Clock,
) -> None:
    aws_provider = make_provider()
    calls = _dry_runs(aws_provider)
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    first = await _reconciled(aws_provider, nodeclasses, nc)
    assert calls == ["CreateLaunchTemplate", "CreateFleet", "RunInstances"]
    clock.step(authorization.VALIDATION_TTL - 1)
    await _reconciled(aws_provider, nodeclasses, first)
    assert len(calls) == 3  # the cached verdict, not asked again
    clock.step(1)
    await _reconciled(aws_provider, nodeclasses, first)
    assert len(calls) == 6  # expired: asked again
    changed = dataclasses.replace(first, spec=dataclasses.replace(first.spec, tags={"team": "a"}))
    await _reconciled(aws_provider, nodeclasses, changed)
    assert len(calls) == 9  # a different spec is a different question
    await aws_provider.finalize_nodeclass(changed)
    await _reconciled(aws_provider, nodeclasses, changed)
    assert len(calls) == 12  # a deleted class's verdicts are forgotten


async def test_a_refusal_is_cached_too(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    denying: Denying,
    enforce: Enforce,
) -> None:
    aws_provider = make_provider(aws_clients=denying("ec2:CreateFleet"))
    await enforce(aws_provider)
    calls = _dry_runs(aws_provider)
    first = await _reconciled(aws_provider, nodeclasses, make_nodeclass(role=seeded.node_role, discovery=CLUSTER))
    assert calls == ["CreateLaunchTemplate", "CreateFleet"]  # stops at the first refusal
    again = await _reconciled(aws_provider, nodeclasses, first)
    assert len(calls) == 2
    assert again.condition(ec2nodeclass.VALIDATION_SUCCEEDED) == first.condition(ec2nodeclass.VALIDATION_SUCCEEDED)


async def test_an_authorized_controller_dry_runs_all_three_once_and_launches(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    calls = _dry_runs(aws_provider)
    nc = await _reconciled(aws_provider, nodeclasses, make_nodeclass(role=seeded.node_role, discovery=CLUSTER))
    assert calls == ["CreateLaunchTemplate", "CreateFleet", "RunInstances"]
    validation = nc.condition(ec2nodeclass.VALIDATION_SUCCEEDED)
    assert validation is not None
    assert validation.is_true
    await _reconciled(aws_provider, nodeclasses, nc)
    assert len(calls) == 3
    ec2 = boto3.client("ec2", region_name=REGION)
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []  # the dry runs made nothing
    await aws_provider.create(builders.parsed_nodeclaim(requirements=[]))


async def test_disable_dry_run_accepts_the_class_without_asking_ec2(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    denying: Denying,
    enforce: Enforce,
) -> None:
    aws_provider = make_provider(aws_clients=denying("ec2:CreateFleet"), disable_dry_run=True)
    await enforce(aws_provider)
    calls = _dry_runs(aws_provider)
    nc = await _reconciled(aws_provider, nodeclasses, make_nodeclass(role=seeded.node_role, discovery=CLUSTER))
    assert calls == []
    ready = nc.condition(ec2nodeclass.READY)
    assert ready is not None
    assert ready.is_true


async def test_bad_user_data_fails_validation_by_name(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    nc = make_nodeclass(alias="bottlerocket@latest", role=seeded.node_role, discovery=CLUSTER, userData="[oops")
    seeding.seed_alias_images(region=REGION, k8s_version="1.31", alias="bottlerocket@latest")
    nc = await _reconciled(aws_provider, nodeclasses, nc)
    validation = nc.condition(ec2nodeclass.VALIDATION_SUCCEEDED)
    assert validation is not None
    assert validation.reason == "UserDataInvalid"
    assert validation.message.startswith("spec.userData: invalid TOML for Bottlerocket")
