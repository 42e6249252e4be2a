"""The cluster DNS Service's address, read once at start as upstream does (aws: pkg/operator/operator.go KubeDNSIP):
GET `kube-system/kube-dns` and take its `spec.clusterIP`. The chart grants a `get` on that one Service."""

from __future__ import annotations

import ipaddress
from typing import Final

from karpy.kube import client, resources

NAMESPACE: Final = "kube-system"
NAME: Final = "kube-dns"


class NotDiscovered(Exception):
    """Why the address is unknown, in one line (the Service is missing, unreadable or has no cluster IP)."""


async def kube_dns_ip(kube: client.KubeClient) -> str:
    """The kube-dns Service's cluster IP, IPv4 or IPv6; raises `NotDiscovered` saying why there is none."""
    try:
        service = await kube.get(resources.SERVICES, NAME, namespace=NAMESPACE)
    except client.KubeError as refused:
        raise NotDiscovered(f"cannot read Service {NAMESPACE}/{NAME}: {refused}") from refused
    if service is None:
        raise NotDiscovered(f"Service {NAMESPACE}/{NAME} does not exist")
    raw = str((service.get("spec") or {}).get("clusterIP") or "")
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:  # headless ("None") or empty
        raise NotDiscovered(f"Service {NAMESPACE}/{NAME} has no cluster IP (spec.clusterIP {raw!r})") from None
