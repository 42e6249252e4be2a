"""DRY_RUN for the cloud side: `DryRunCloud` wraps any `CloudProvider`; reads (get, list, instance types, drift) go
to the real cloud, every launch and termination is logged ("dry run: would ...") and not made.

The Kubernetes writes of a dry-run controller are already only logged (`karpy.kube.dryrun`), so it creates no
NodeClaim of its own; but its NodeClaim lifecycle still sees the NodeClaims of the cluster, and its garbage
collection the instances carrying the cluster's tags. A dry run beside a working autoscaler (upstream Karpenter,
while a cluster migrates) must never launch for those claims nor terminate those instances: it decides and logs.
"""

from __future__ import annotations

import logging
from typing import Protocol

from karpy.api import ec2nodeclass, nodeclaim
from karpy.cloudprovider import errors, types, wrapping

log = logging.getLogger(__name__)


class DryRunCloud(wrapping.ReadThrough):
    """A `CloudProvider` that reads through to `inner` and only logs what it would launch or terminate."""

    def __init__(self, inner: types.CloudProvider, *, logger: logging.Logger = log) -> None:
        super().__init__(inner)
        self._log = logger

    async def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        self._log.info("dry run: would launch an instance", extra={"nodeclaim": claim.name})
        raise errors.CreateError(errors.CreateErrorReason.DRY_RUN, f"dry run: nodeclaim {claim.name} not launched")

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self._log.info(
            "dry run: would terminate the instance",
            extra={"nodeclaim": claim.name, "providerID": claim.status.provider_id},
        )


class NodeClassReconciler(Protocol):
    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus: ...

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None: ...


class DryRunNodeClasses:
    """The node-class half of a provider in a dry run: resolution (subnets, security groups, AMIs: what every
    decision reads) goes through; the cleanup of a deleted class (its launch templates, its instance profile) is
    only logged."""

    def __init__(self, inner: NodeClassReconciler, *, logger: logging.Logger = log) -> None:
        self._inner = inner
        self._log = logger

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus:
        return await self._inner.reconcile_nodeclass(nc)

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None:
        self._log.info(
            "dry run: would delete the launch templates and instance profile of a deleted EC2NodeClass",
            extra={"ec2nodeclass": nc.name},
        )
