"""The user data a launch really writes into its launch template on moto, per family, against the consumers'
contracts: the labels the launch adds (the chosen capacity type, for every family), the Bottlerocket version that
decides the RAID0 bind, and an AL2023 class on a cluster whose service CIDR is unknown (aws:
pkg/providers/launchtemplate/suite_test.go, the cases named in each test)."""

from __future__ import annotations

import base64
import dataclasses
import tomllib
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore import awsrequest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.contracts import families
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, NodeClasses

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import provider
from karpy_emulator import bootstrap as karpy_emulator_bootstrap
from karpy_emulator.aws import seeding

SMALL = builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large")


async def _reconciled(
    aws_provider: provider.AWSCloudProvider,
    nodeclasses: NodeClasses,
    *,
    alias: str,
    role: str,
    **spec: Any,
) -> ec2nodeclass.EC2NodeClass:
    seeding.seed_alias_images(region=REGION, k8s_version="1.31", alias=alias)
    nc = make_nodeclass(alias=alias, role=role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, spec=dataclasses.replace(nc.spec, **spec))
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    return nc


def _launched_user_data() -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    out = []
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
            "LaunchTemplateVersions"
        ]
        out.append(base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode())
    return out


@pytest.mark.parametrize("alias", ["windows2022@latest", "al2023@latest", "al2@latest", "bottlerocket@latest"])
async def test_the_chosen_capacity_type_is_a_kubelet_label_for_every_family(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    alias: str,
) -> None:
    """upstream: "should specify the capacity type label" via EnsureAll (windows_userdata_merged.golden has
    `karpenter.sh/capacity-type=spot` for a claim allowing both)."""
    aws_provider = make_provider()
    nc = await _reconciled(aws_provider, nodeclasses, alias=alias, role=seeded.node_role)
    family = nc.resolved_ami_family
    claim = builders.parsed_nodeclaim(
        requirements=(
            SMALL,
            builders.requirement(
                labels.LABEL_CAPACITY_TYPE, "In", labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND
            ),
        ),
        labels={"node-restriction.kubernetes.io/pci": "true", "team": "a"},
    )
    created = await aws_provider.create(claim)
    (text,) = _launched_user_data()
    assert families.problems(family, text) == []
    kubelet_labels = karpy_emulator_bootstrap.parse(text).labels
    chosen = created.metadata.labels[labels.LABEL_CAPACITY_TYPE]
    assert kubelet_labels[labels.LABEL_CAPACITY_TYPE] == chosen
    assert kubelet_labels["team"] == "a"
    assert kubelet_labels[labels.LABEL_DO_NOT_SYNC_TAINTS] == "true"
    # Withheld from the kubelet, still on the claim: registration puts it on the Node.
    assert "node-restriction.kubernetes.io/pci" not in kubelet_labels
    assert created.metadata.labels["node-restriction.kubernetes.io/pci"] == "true"


async def test_bottlerocket_latest_binds_the_default_directories(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    """upstream: "should use default bind for Bottlerocket v1.46.0" (an alias at latest is past 1.46)."""
    aws_provider = make_provider()
    await _reconciled(
        aws_provider, nodeclasses, alias="bottlerocket@latest", role=seeded.node_role, instance_store_policy="RAID0"
    )
    await aws_provider.create(builders.parsed_nodeclaim(requirements=(SMALL,)))
    (text,) = _launched_user_data()
    assert families.problems(ec2nodeclass.AMIFamily.BOTTLEROCKET, text) == []
    command = tomllib.loads(text)["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert command["commands"][1] == ["apiclient", "ephemeral-storage", "bind"]


async def test_al2023_without_a_cluster_cidr_creates_no_launch_template(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    """upstream: "should fail to create launch templates if cluster CIDR is unresolved" (the pod is not scheduled,
    CreateLaunchTemplate is never called) and validation.go's ClusterCIDRResolutionFailed."""
    aws_provider = make_provider()
    eks = aws_provider._deps.aws.eks
    described = eks.describe_cluster(name=CLUSTER)["cluster"]
    without_cidr = {"cluster": {k: v for k, v in described.items() if k != "kubernetesNetworkConfig"}}
    eks.meta.events.register(
        "before-call.eks.DescribeCluster",
        lambda **_: (awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None), without_cidr),
    )
    nc = await _reconciled(aws_provider, nodeclasses, alias="al2023@latest", role=seeded.node_role)
    validation = nc.condition(ec2nodeclass.VALIDATION_SUCCEEDED)
    assert validation is not None
    assert (validation.is_true, validation.reason) == (False, "ClusterCIDRResolutionFailed")
    with pytest.raises(errors.NodeClassNotReady):
        await aws_provider.create(builders.parsed_nodeclaim(requirements=(SMALL,)))
    assert _launched_user_data() == []
