"""What nodes are told of their cluster, from EKS DescribeCluster (table tests), and the IPv6 cluster DNS default."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import cluster


@pytest.mark.parametrize(
    ("network", "cidr", "ipv6", "dns"),
    [
        ({"serviceIpv4Cidr": "10.100.0.0/16", "ipFamily": "ipv4"}, "10.100.0.0/16", False, "10.100.0.10"),
        ({"serviceIpv4Cidr": "172.20.0.0/16"}, "172.20.0.0/16", False, "172.20.0.10"),
        (
            {"serviceIpv4Cidr": "10.100.0.0/16", "serviceIpv6Cidr": "fd30:1c53:5f8a::/108", "ipFamily": "ipv6"},
            "fd30:1c53:5f8a::/108",
            True,
            "fd30:1c53:5f8a::a",
        ),
        ({}, "", False, ""),
    ],
)
def test_the_service_cidr_and_family_come_from_describe_cluster(
    network: dict[str, Any], cidr: str, ipv6: bool, dns: str
) -> None:
    described = {"endpoint": "https://e", "version": "1.31", "kubernetesNetworkConfig": network}
    info = cluster.cluster_info(described, name="demo")
    assert (info.service_cidr, info.ipv6, info.dns_ip) == (cidr, ipv6, dns)
    assert (info.endpoint, info.version) == ("https://e", "1.31")
    assert cluster.cluster_info(described, name="demo", endpoint="https://mine").endpoint == "https://mine"


IPV6 = cluster.ClusterInfo(name="c", endpoint="e", ca_bundle="x", version="1.31", service_cidr="fd00::/108", ipv6=True)
IPV4 = cluster.ClusterInfo(name="c", endpoint="e", ca_bundle="x", version="1.31", service_cidr="10.0.0.0/16")


def test_an_ipv6_cluster_gets_its_kube_dns_address_unless_the_class_names_one() -> None:
    assert cluster.with_cluster_dns(None, IPV6) == ec2nodeclass.KubeletConfiguration(cluster_dns=("fd00::a",))
    mine = ec2nodeclass.KubeletConfiguration(cluster_dns=("fd00::53",), max_pods=10)
    assert cluster.with_cluster_dns(mine, IPV6) is mine
    kept = ec2nodeclass.KubeletConfiguration(max_pods=10)
    assert cluster.with_cluster_dns(kept, IPV6) == ec2nodeclass.KubeletConfiguration(
        max_pods=10, cluster_dns=("fd00::a",)
    )
    assert cluster.with_cluster_dns(kept, IPV4) is kept  # IPv4: the bootstrap's own default, as before


def test_the_discovered_kube_dns_address_is_every_nodes_unless_the_class_names_one() -> None:
    """aws: pkg/providers/amifamily/resolver.go defaultClusterDNS: the address read at start, IPv4 or IPv6, fills
    clusterDNS when the class leaves it empty; an IPv6 cluster's CIDR-derived address is only the fallback."""
    found = cluster.cluster_info(
        {"kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.123.0.0/16"}}, name="c", kube_dns_ip="10.123.0.53"
    )
    assert found.kube_dns_ip == "10.123.0.53"
    assert cluster.with_cluster_dns(None, found) == ec2nodeclass.KubeletConfiguration(cluster_dns=("10.123.0.53",))
    kept = ec2nodeclass.KubeletConfiguration(max_pods=10)
    assert cluster.with_cluster_dns(kept, found) == ec2nodeclass.KubeletConfiguration(
        max_pods=10, cluster_dns=("10.123.0.53",)
    )
    mine = ec2nodeclass.KubeletConfiguration(cluster_dns=("169.254.20.10",))
    assert cluster.with_cluster_dns(mine, found) is mine
    ipv6 = dataclasses.replace(IPV6, kube_dns_ip="fd00::53")
    assert cluster.with_cluster_dns(None, ipv6) == ec2nodeclass.KubeletConfiguration(cluster_dns=("fd00::53",))
