"""The kube-dns address discovered at start reaches every family's user data against moto, where upstream writes it
(aws: pkg/providers/amifamily/resolver.go defaultClusterDNS, then bootstrap/*.go): nodeadm's `clusterDNS`, AL2's
`--dns-cluster-ip`, Bottlerocket's `cluster-dns-ip`, Windows' `-DNSClusterIP`; a class that names one keeps it."""

from __future__ import annotations

import base64
import dataclasses
import email
from collections.abc import Callable

import boto3
import pytest
import yaml
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, NodeClasses

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import provider
from karpy_emulator.aws import seeding

SMALL = (builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),)
DISCOVERED = "10.123.0.53"
"""Neither moto's service CIDR's (172.20.0.0/16) tenth address nor EKS' defaults: only discovery can give it."""


async def _launched_user_data(
    aws_provider: provider.AWSCloudProvider,
    nodeclasses: NodeClasses,
    *,
    alias: str,
    role: str,
    kubelet: ec2nodeclass.KubeletConfiguration | None = None,
) -> str:
    seeding.seed_alias_images(region=REGION, k8s_version="1.31", alias=alias)
    nc = make_nodeclass(alias=alias, role=role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, spec=dataclasses.replace(nc.spec, kubelet=kubelet))
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    await aws_provider.create(builders.parsed_nodeclaim(requirements=SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ]
    return base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()


def _node_config_cluster_dns(user_data: str) -> list[str]:
    """`spec.kubelet.config.clusterDNS` of every NodeConfig in the MIME document, in order (nodeadm's view)."""
    found: list[str] = []
    for part in email.message_from_string(user_data).walk():
        if part.get_content_type() == "application/node.eks.aws":
            for config in yaml.safe_load_all(str(part.get_payload())):
                found += ((config.get("spec") or {}).get("kubelet") or {}).get("config", {}).get("clusterDNS", [])
    return found


@pytest.mark.parametrize(
    ("alias", "written"),
    [
        ("al2023@latest", f"NodeConfig clusterDNS {[DISCOVERED]}"),
        ("al2@latest", f"--dns-cluster-ip '{DISCOVERED}'"),
        ("bottlerocket@latest", f'cluster-dns-ip = "{DISCOVERED}"'),
        ("windows2022@latest", f"-DNSClusterIP '{DISCOVERED}'"),
    ],
)
async def test_every_family_is_told_the_discovered_address(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    alias: str,
    written: str,
) -> None:
    aws_provider = make_provider()
    aws_provider.use_kube_dns(DISCOVERED)
    user_data = await _launched_user_data(aws_provider, nodeclasses, alias=alias, role=seeded.node_role)
    if alias.startswith("al2023"):
        user_data = f"NodeConfig clusterDNS {_node_config_cluster_dns(user_data)}"
    assert written in user_data


async def test_a_class_that_names_its_cluster_dns_keeps_it(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    aws_provider.use_kube_dns(DISCOVERED)
    mine = ec2nodeclass.KubeletConfiguration(cluster_dns=("169.254.20.10",))
    user_data = await _launched_user_data(
        aws_provider, nodeclasses, alias="al2@latest", role=seeded.node_role, kubelet=mine
    )
    assert "--dns-cluster-ip '169.254.20.10'" in user_data
    assert DISCOVERED not in user_data
