"""DRY_RUN for the cloud side: `wrap` puts a provider's parts in their dry-run wrappers. `DryRunCloud` wraps any
`CloudProvider`; reads (get, list, instance types, drift) go to the real cloud, every launch and termination is
logged ("dry run: would ...") and not made. The node-class cleanup and the deletion of interruption messages are
only logged as well.

The Kubernetes writes of a dry-run controller are already only logged (`karpy.kube.dryrun`), so it creates no
NodeClaim of its own; but its NodeClaim lifecycle still sees the NodeClaims of the cluster, and its garbage
collection the instances carrying the cluster's tags. A dry run beside a working autoscaler (upstream Karpenter,
while a cluster migrates) must never launch for those claims nor terminate those instances: it decides and logs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from karpy.api import ec2nodeclass, nodeclaim
from karpy.cloudprovider import errors, interruption, parts, types, wrapping

log = logging.getLogger(__name__)


def wrap(cloud: parts.CloudParts) -> parts.CloudParts:
    """`cloud` in a dry run: no launch, termination, node-class cleanup or queue deletion, only logs. The zonal-shift
    reader stays (it only reads; its events go through the dry-run recorder), and so do the read-only checks."""
    return dataclasses.replace(
        cloud,
        provider=DryRunCloud(cloud.provider),
        nodeclasses=DryRunNodeClasses(cloud.nodeclasses) if cloud.nodeclasses is not None else None,
        queue=DryRunQueue(cloud.queue) if cloud.queue is not None else None,
    )


class DryRunCloud(wrapping.ReadThrough):
    """A `CloudProvider` that reads through to `inner` and only logs what it would launch or terminate."""

    def __init__(self, inner: types.CloudProvider, *, logger: logging.Logger = log) -> None:
        super().__init__(inner)
        self._log = logger

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        self._log.info("dry run: would launch an instance", extra={"nodeclaim": claim.name})
        raise errors.CreateError(errors.CreateErrorReason.DRY_RUN, f"dry run: nodeclaim {claim.name} not launched")

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self._log.info(
            "dry run: would terminate the instance",
            extra={"nodeclaim": claim.name, "providerID": claim.status.provider_id},
        )


class DryRunNodeClasses:
    """The node-class half of a provider in a dry run: resolution (subnets, security groups, AMIs: what every
    decision reads) goes through; the cleanup of a deleted class (its launch templates, its instance profile) is
    only logged."""

    def __init__(self, inner: parts.NodeClassReconciler, *, logger: logging.Logger = log) -> None:
        self._inner = inner
        self._log = logger

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus:
        return await self._inner.reconcile_nodeclass(nc)

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None:
        self._log.info(
            "dry run: would delete the launch templates and instance profile of a deleted EC2NodeClass",
            extra={"ec2nodeclass": nc.name},
        )


class DryRunQueue:
    """DRY_RUN: messages are received and acted on as far as a dry run acts (logged decisions), but never deleted,
    so the autoscaler that really handles them (upstream Karpenter during a migration) still gets every one once
    the visibility timeout lapses."""

    def __init__(self, inner: parts.QueueClient, *, logger: logging.Logger = log) -> None:
        self._inner = inner
        self._log = logger

    async def receive(self, *, wait_seconds: int = 20) -> Sequence[interruption.Received | interruption.Unreadable]:
        return await self._inner.receive(wait_seconds=wait_seconds)

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        if isinstance(received, interruption.Unreadable):
            self._log.info(
                "dry run: would delete the unreadable interruption message", extra={"reason": received.reason}
            )
            return
        message = received.message
        self._log.info(
            "dry run: would delete the interruption message",
            extra={"messageKind": str(message.kind), "instances": list(message.instance_ids)},
        )
