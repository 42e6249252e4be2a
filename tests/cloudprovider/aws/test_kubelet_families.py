"""spec.kubelet against moto: a class whose AMI family applies every field it sets is Ready and its launch template's
user data carries them; a class setting a field its family would drop is not Ready and launches nothing."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable

import boto3
import pytest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, NodeClasses

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import provider
from karpy_emulator.aws import seeding

SMALL = (builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),)
UPSTREAM_FIELDS = ec2nodeclass.KubeletConfiguration(
    eviction_soft={"memory.available": "10%"},
    eviction_soft_grace_period={"memory.available": "1m"},
    image_gc_high_threshold_percent=80,
    cpu_cfs_quota=False,
    passthrough={"serializeImagePulls": False, "containerLogMaxSize": "50Mi"},
)
MAPPED_FIELDS = dataclasses.replace(UPSTREAM_FIELDS, passthrough={})


async def _reconciled(
    aws_provider: provider.AWSCloudProvider,
    nodeclasses: NodeClasses,
    *,
    alias: str,
    kubelet: ec2nodeclass.KubeletConfiguration,
    role: str,
) -> ec2nodeclass.EC2NodeClass:
    seeding.seed_alias_images(region=REGION, k8s_version="1.31", alias=alias)
    nc = make_nodeclass(alias=alias, role=role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, spec=dataclasses.replace(nc.spec, kubelet=kubelet))
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    return nc


def _launched_user_data() -> str:
    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ]
    return base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()


@pytest.mark.parametrize(
    ("alias", "kubelet", "expected"),
    [
        (
            "al2023@latest",
            UPSTREAM_FIELDS,
            ("serializeImagePulls: false", "containerLogMaxSize: 50Mi", "cpuCFSQuota: false", "evictionSoft:"),
        ),
        (
            "al2@latest",
            MAPPED_FIELDS,
            ('--eviction-soft="memory.available<10%"', "--image-gc-high-threshold=80", "--cpu-cfs-quota=false"),
        ),
        (
            "bottlerocket@latest",
            MAPPED_FIELDS,
            (
                'image-gc-high-threshold-percent = "80"',
                "cpu-cfs-quota-enforced = false",
                "[settings.kubernetes.eviction-soft]",
            ),
        ),
    ],
    ids=["al2023-any-field", "al2-mapped", "bottlerocket-mapped"],
)
async def test_a_class_whose_family_applies_its_fields_launches_with_them(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    alias: str,
    kubelet: ec2nodeclass.KubeletConfiguration,
    expected: tuple[str, ...],
) -> None:
    aws_provider = make_provider()
    nc = await _reconciled(aws_provider, nodeclasses, alias=alias, kubelet=kubelet, role=seeded.node_role)
    ready = nc.condition(ec2nodeclass.READY)
    assert ready is not None
    assert ready.is_true, ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    user_data = _launched_user_data()
    for text in expected:
        assert text in user_data


@pytest.mark.parametrize("alias", ["al2@latest", "bottlerocket@latest", "windows2022@latest"])
async def test_a_field_the_family_would_drop_keeps_the_class_from_launching(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    alias: str,
) -> None:
    aws_provider = make_provider()
    nc = await _reconciled(aws_provider, nodeclasses, alias=alias, kubelet=UPSTREAM_FIELDS, role=seeded.node_role)
    validation = nc.condition(ec2nodeclass.VALIDATION_SUCCEEDED)
    assert validation is not None
    assert not validation.is_true
    assert validation.reason == "UnsupportedKubeletConfiguration"
    assert validation.message.endswith("silently dropped: containerLogMaxSize, serializeImagePulls")
    with pytest.raises(errors.NodeClassNotReady):
        await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    assert boto3.client("ec2", region_name=REGION).describe_launch_templates()["LaunchTemplates"] == []
