"""Dedicated tenancy against moto: a claim allowing only dedicated tenancy launches from a template placing the
instance on dedicated hardware, and the instance reads back as dedicated; default stays unsaid in the template."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import REGION
from tests.provisioning import builders as provisioning_builders

from karpy import events, rejections
from karpy.api import ec2nodeclass, labels, nodepool, parse
from karpy.clock import ManualClock
from karpy.cloudprovider import tenancy
from karpy.cloudprovider.aws import instances, provider
from karpy.kube import fake, resources
from karpy.provisioning import provisioner

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]
M5 = builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large")


def _template_placement(name: str) -> object:
    ec2 = boto3.client("ec2", region_name=REGION)
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
    return version["LaunchTemplateData"].get("Placement")


def _record_fleets(aws_provider: provider.AWSCloudProvider) -> list[dict[str, object]]:
    fleets: list[dict[str, object]] = []
    aws_provider._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    return fleets


async def test_a_dedicated_claim_launches_on_dedicated_hardware(ready: Ready) -> None:
    aws_provider, _ = ready
    fleets = _record_fleets(aws_provider)
    dedicated = (M5, builders.requirement(labels.LABEL_INSTANCE_TENANCY, "In", "dedicated"))
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=dedicated))
    assert created.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "dedicated"
    (config,) = fleets[0]["LaunchTemplateConfigs"]  # type: ignore[misc]
    assert _template_placement(config["LaunchTemplateSpecification"]["LaunchTemplateName"]) == {"Tenancy": "dedicated"}

    shared = await aws_provider.create(builders.parsed_nodeclaim("shared", requirements=(M5,)))
    assert shared.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "default"
    (config,) = fleets[1]["LaunchTemplateConfigs"]  # type: ignore[misc]
    assert _template_placement(config["LaunchTemplateSpecification"]["LaunchTemplateName"]) is None


async def test_an_instance_reads_back_with_its_tenancy(ready: Ready) -> None:
    aws_provider, _ = ready
    ec2 = boto3.client("ec2", region_name=REGION)
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=(M5,)))
    assert (await aws_provider.get(created.status.provider_id)).metadata.labels[labels.LABEL_INSTANCE_TENANCY] == (
        "default"
    )
    described = ec2.describe_instances(InstanceIds=[instances.parse_provider_id(created.status.provider_id)])
    instance = described["Reservations"][0]["Instances"][0]
    instance["Placement"]["Tenancy"] = "dedicated"  # as EC2 describes an instance on dedicated hardware
    ref = created.spec.node_class_ref
    claim = instances.nodeclaim_from_instance(instance, instance_type=None, node_class_ref=ref)
    assert claim.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == "dedicated"


def _pool_allowing(*tenancies: str) -> nodepool.NodePool:
    terms = [builders.requirement(labels.LABEL_INSTANCE_TENANCY, "In", *tenancies)] if tenancies else []
    return builders.parsed_nodepool(requirements=terms)


async def test_a_pool_sees_its_types_with_the_tenancy_it_allows(ready: Ready) -> None:
    aws_provider, _ = ready

    async def seen(pool: nodepool.NodePool) -> set[str]:
        return {it.labels.get(labels.LABEL_INSTANCE_TENANCY, "both") for it in await aws_provider.instance_types(pool)}

    assert await seen(_pool_allowing("dedicated")) == {"dedicated"}
    assert await seen(_pool_allowing("default")) == {"default"}
    # Upstream's types allow both (instance-tenancy In [default, dedicated]): the label is left for the pod to decide.
    assert await seen(_pool_allowing("default", "dedicated")) == {"both"}
    assert await seen(_pool_allowing()) == {"both"}


@pytest.mark.parametrize(("pod_tenancy", "launched"), [("dedicated", "dedicated"), (None, "default")])
async def test_a_pod_picks_the_tenancy_in_a_pool_allowing_both(
    ready: Ready, pod_tenancy: str | None, launched: str
) -> None:
    aws_provider, nc = ready
    pool = builders.nodepool(
        requirements=[
            builders.requirement(labels.LABEL_INSTANCE_TENANCY, "In", "default", "dedicated"),
            builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
        ]
    )
    selector = {"nodeSelector": {labels.LABEL_INSTANCE_TENANCY: pod_tenancy}} if pod_tenancy else {}
    # The node class is in the provider's cache, reconciled; the state needs none (it only hashes it on the claim).
    del nc
    cluster = provisioning_builders.state(
        ManualClock(0.0), pools=[pool], pending=[builders.pod("p", **selector, memory="1Gi")]
    )
    client = fake.FakeKubeClient(ManualClock(0.0))
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=client,
            cluster=cluster,
            cloud=aws_provider,
            clock=ManualClock(0.0),
            recorder=events.MemoryRecorder(),
            rejections=rejections.Discard(),
        )
    )
    await prov.provision()
    (body,) = client.all(resources.NODECLAIMS)
    body = {**body, "metadata": {**body["metadata"], "name": "claim"}}
    fleets = _record_fleets(aws_provider)
    created = await aws_provider.create(parse.nodeclaim(body))
    assert created.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == launched
    (config,) = fleets[0]["LaunchTemplateConfigs"]  # type: ignore[misc]
    placement = _template_placement(config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert placement == ({"Tenancy": "dedicated"} if launched == "dedicated" else None)


async def test_launches_label_the_catalog_once_per_tenancy(ready: Ready, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_provider, nodeclass = ready
    labelled: list[str] = []
    for_claim = tenancy.for_claim

    def counted(types_: Any, wanted: str) -> Any:
        labelled.append(wanted)
        return for_claim(types_, wanted)

    monkeypatch.setattr(tenancy, "for_claim", counted)
    dedicated = (M5, builders.requirement(labels.LABEL_INSTANCE_TENANCY, "In", "dedicated"))
    for index, terms in enumerate([(M5,), (M5,), dedicated, (M5,), dedicated]):
        created = await aws_provider.create(builders.parsed_nodeclaim(f"claim-{index}", requirements=terms))
        assert created.metadata.labels[labels.LABEL_INSTANCE_TENANCY] == (
            "dedicated" if terms is dedicated else "default"
        )
    assert labelled == ["default", "dedicated"]  # ~800 types relabelled per launch cost seconds at 1,000 launches
    catalog = await aws_provider.instance_type_provider.list(nodeclass)
    rebuilt = tuple(list(catalog))  # a rebuilt catalog (new prices, an offering marked unavailable) is labelled afresh
    assert aws_provider._for_tenancy(rebuilt, "default") is not aws_provider._for_tenancy(catalog, "default")
    assert labelled == ["default", "dedicated", "default", "default"]
