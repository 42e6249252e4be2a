"""An IPv6 EKS cluster against moto: its nodes launch from templates giving them a primary IPv6 address, with the
IPv6 service CIDR for nodeadm and the IPv6 kube-dns address as cluster DNS (aws: launchtemplate.go
generateNetworkInterfaces, ResolveClusterCIDR; resolver.go clusterDNS default)."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator

import boto3
import pytest
import yaml
from moto.eks import models as eks_models
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, Clock, NodeClasses

from karpy.api import labels
from karpy.cloudprovider.aws import clients, provider
from karpy_emulator.aws import seeding

IPV6_CLUSTER = "ipv6-demo"
SERVICE_CIDR = "fd30:1c53:5f8a::/108"


@pytest.fixture
def ipv6_cluster(seeded: seeding.Seeded) -> Iterator[str]:
    eks = boto3.client("eks", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    role = iam.get_role(RoleName=seeded.node_role)["Role"]["Arn"]
    eks.create_cluster(
        name=IPV6_CLUSTER,
        version="1.31",
        roleArn=role,
        resourcesVpcConfig={"subnetIds": list(seeded.subnet_ids)},
        kubernetesNetworkConfig={"ipFamily": "ipv6"},
    )
    # EKS picks an IPv6 cluster's service CIDR itself and DescribeCluster reports it; moto's cluster is told it.
    stored = eks_models.eks_backends[seeding.ACCOUNT_ID][REGION].clusters[IPV6_CLUSTER]
    stored.kubernetes_network_config = {"ipFamily": "ipv6", "serviceIpv6Cidr": SERVICE_CIDR}
    try:
        yield IPV6_CLUSTER
    finally:
        eks.delete_cluster(name=IPV6_CLUSTER)


async def test_an_ipv6_cluster_launches_nodes_with_a_primary_ipv6_address(
    seeded: seeding.Seeded, aws: clients.Clients, clock: Clock, nodeclasses: NodeClasses, ipv6_cluster: str
) -> None:
    aws_provider = provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=clock,
            settings=provider.Settings(cluster_name=ipv6_cluster, region=REGION, isolated_vpc=True),
            nodeclass_lookup=nodeclasses.lookup,
            sleep=clock.sleep,
            nodeclaims=tuple,
        )
    )
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    await aws_provider.create(
        builders.parsed_nodeclaim(requirements=(builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),))
    )

    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ]
    data = version["LaunchTemplateData"]
    (interface,) = data["NetworkInterfaces"]
    assert (interface["DeviceIndex"], interface["PrimaryIpv6"], interface["Ipv6AddressCount"]) == (0, True, 1)
    user_data = base64.b64decode(data["UserData"]).decode()
    node_config = yaml.safe_load(user_data.split("application/node.eks.aws", 1)[1].split("\n--", 1)[0])
    assert node_config["spec"]["cluster"]["cidr"] == SERVICE_CIDR
    assert node_config["spec"]["kubelet"]["config"]["clusterDNS"] == ["fd30:1c53:5f8a::a"]
