"""What a node needs to know of its EKS cluster, from DescribeCluster, pure: endpoint, CA, version, the service
CIDR nodeadm is told, and whether the cluster is IPv6 (aws: pkg/providers/launchtemplate/launchtemplate.go
ResolveClusterCIDR, pkg/operator/operator.go KubeDNSIP)."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import ec2nodeclass


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What nodes need to join: from settings, completed by EKS DescribeCluster."""

    name: str
    endpoint: str
    ca_bundle: str
    version: str
    service_cidr: str = ""
    """The service CIDR nodeadm is told (IPv6 when the cluster has one, as upstream's ResolveClusterCIDR)."""
    ipv6: bool = False
    """An IPv6 cluster: nodes take a primary IPv6 address and the IPv6 cluster DNS."""
    kube_dns_ip: str = ""
    """The kube-dns Service's cluster IP discovered at start ("" when it could not be): nodes' cluster DNS."""

    @property
    def dns_ip(self) -> str:
        """The cluster DNS address EKS gives kube-dns: the service CIDR's tenth address ("" when the CIDR is
        unknown), as the EKS bootstrap derives it."""
        try:
            network = ipaddress.ip_network(self.service_cidr, strict=False)
        except ValueError:
            return ""
        return str(network.network_address + 10)


def cluster_info(
    described: Mapping[str, Any], *, name: str, endpoint: str = "", version: str = "", kube_dns_ip: str = ""
) -> ClusterInfo:
    """What a node needs from an EKS DescribeCluster answer; `endpoint` and `version` from settings win."""
    network = described.get("kubernetesNetworkConfig") or {}
    ipv6_cidr = str(network.get("serviceIpv6Cidr") or "")
    return ClusterInfo(
        name=name,
        endpoint=endpoint or str(described.get("endpoint", "")),
        ca_bundle=str((described.get("certificateAuthority") or {}).get("data", "")),
        version=version or str(described.get("version", "")),
        service_cidr=ipv6_cidr or str(network.get("serviceIpv4Cidr") or ""),
        ipv6=str(network.get("ipFamily") or "").lower() == "ipv6" or bool(ipv6_cidr),
        kube_dns_ip=kube_dns_ip,
    )


def with_cluster_dns(
    kubelet: ec2nodeclass.KubeletConfiguration | None, cluster: ClusterInfo
) -> ec2nodeclass.KubeletConfiguration | None:
    """Nodes get the kube-dns address discovered at start unless the class names one (aws:
    pkg/providers/amifamily/resolver.go defaultClusterDNS). Without it, an IPv6 cluster's nodes get its IPv6 kube-dns
    address from the service CIDR: the bootstrap scripts' own default is the IPv4 one."""
    address = cluster.kube_dns_ip or (cluster.dns_ip if cluster.ipv6 else "")
    if not address or (kubelet is not None and kubelet.cluster_dns):
        return kubelet
    return dataclasses.replace(kubelet or ec2nodeclass.KubeletConfiguration(), cluster_dns=(address,))
