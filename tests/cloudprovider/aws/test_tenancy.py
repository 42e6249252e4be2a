"""Dedicated tenancy against moto: a claim allowing only dedicated tenancy launches from a template placing the
instance on dedicated hardware, and the instance reads back as dedicated; default stays unsaid in the template."""

from __future__ import annotations

import dataclasses

import boto3
from tests.cloudprovider import contract
from tests.cloudprovider.aws.builders import make_nodeclaim, req
from tests.cloudprovider.aws.moto_fixtures import REGION

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import instances, provider

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]
M5 = req(labels.LABEL_INSTANCE_TYPE, meta.Operator.IN, "m5.large")


def _template_placement(name: str) -> object:
    ec2 = boto3.client("ec2", region_name=REGION)
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
    return version["LaunchTemplateData"].get("Placement")


async def test_a_dedicated_claim_launches_on_dedicated_hardware(ready: Ready) -> None:
    aws_provider, _ = ready
    fleets: list[dict[str, object]] = []
    aws_provider._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    dedicated = (M5, req(labels.LABEL_INSTANCE_TENANCY, meta.Operator.IN, "dedicated"))
    created = await aws_provider.create(make_nodeclaim(requirements=dedicated))
    assert created.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "dedicated"
    (config,) = fleets[0]["LaunchTemplateConfigs"]  # type: ignore[misc]
    assert _template_placement(config["LaunchTemplateSpecification"]["LaunchTemplateName"]) == {"Tenancy": "dedicated"}

    shared = await aws_provider.create(make_nodeclaim("shared", requirements=(M5,)))
    assert shared.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "default"
    (config,) = fleets[1]["LaunchTemplateConfigs"]  # type: ignore[misc]
    assert _template_placement(config["LaunchTemplateSpecification"]["LaunchTemplateName"]) is None


async def test_an_instance_reads_back_with_its_tenancy(ready: Ready) -> None:
    aws_provider, _ = ready
    ec2 = boto3.client("ec2", region_name=REGION)
    created = await aws_provider.create(make_nodeclaim(requirements=(M5,)))
    assert (await aws_provider.get(created.status.provider_id)).metadata.labels[labels.LABEL_INSTANCE_TENANCY] == (
        "default"
    )
    described = ec2.describe_instances(InstanceIds=[instances.parse_provider_id(created.status.provider_id)])
    instance = described["Reservations"][0]["Instances"][0]
    instance["Placement"]["Tenancy"] = "dedicated"  # as EC2 describes an instance on dedicated hardware
    ref = created.spec.node_class_ref
    claim = instances.nodeclaim_from_instance(instance, instance_type=None, node_class_ref=ref)
    assert claim.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "dedicated"


async def test_a_dedicated_only_pool_sees_dedicated_instance_types(ready: Ready) -> None:
    aws_provider, _ = ready
    pool = contract.make_nodepool()
    pool = dataclasses.replace(
        pool,
        template=dataclasses.replace(
            pool.template, requirements=(req(labels.LABEL_INSTANCE_TENANCY, meta.Operator.IN, "dedicated"),)
        ),
    )
    assert {it.labels[labels.LABEL_INSTANCE_TENANCY] for it in await aws_provider.instance_types(pool)} == {"dedicated"}
    assert {
        it.labels[labels.LABEL_INSTANCE_TENANCY] for it in await aws_provider.instance_types(contract.make_nodepool())
    } == {"default"}
