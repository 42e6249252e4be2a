"""Start-up steps of the cloud side that read the Kubernetes API, run with its own start-up check (`CloudParts.check`,
awaited by `karpy.operator.app.run` before anything else runs).

The kube-dns address: upstream reads it once at start and gives it to every node as its cluster DNS unless the
EC2NodeClass names one (aws: pkg/operator/operator.go KubeDNSIP, pkg/providers/amifamily/resolver.go
defaultClusterDNS). When it cannot, it starts anyway (custom DNS setups have no kube-dns Service): one log line says
why, and nodes keep the cluster DNS their bootstrap defaults to.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.kube import client, clusterdns

log = logging.getLogger(__name__)


def with_kube_dns(cloud: cloudprovider_parts.CloudParts, kube: client.KubeClient) -> cloudprovider_parts.CloudParts:
    """`cloud` whose start-up check first discovers the kube-dns address and tells the provider; unchanged when the
    provider takes none."""
    use, check = cloud.use_kube_dns, cloud.check
    if use is None:
        return cloud

    async def start() -> None:
        await discover_kube_dns(kube, use)
        if check is not None:
            await check()

    return dataclasses.replace(cloud, check=start)


async def discover_kube_dns(kube: client.KubeClient, use: Callable[[str], None]) -> None:
    try:
        address = await clusterdns.kube_dns_ip(kube)
    except clusterdns.NotDiscovered as missing:
        log.warning(
            "kube-dns not discovered (%s): nodes get the cluster DNS their bootstrap defaults to, unless their "
            "EC2NodeClass sets spec.kubelet.clusterDNS",
            missing,
        )
        return
    log.info(
        "kube-dns discovered at %s: nodes get it as their cluster DNS unless their EC2NodeClass names one", address
    )
    use(address)
