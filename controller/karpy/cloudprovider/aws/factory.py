"""Build everything the controller needs from AWS in one call: the provider, the interruption queue, the ICE cache.

The operator's wiring imports this module when it starts with the AWS provider. boto3 reads `AWS_ENDPOINT_URL`
itself, so the same code runs against moto.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from karpy.api import ec2nodeclass, nodeclaim
from karpy.cloudprovider.aws import accounting, cache, clients, instancestatus, provider, startup, zonalshift
from karpy.cloudprovider.aws import interruption_queue as aws_interruption_queue


@dataclass(frozen=True, slots=True)
class Built:
    provider: provider.AWSCloudProvider
    queue: aws_interruption_queue.InterruptionQueue | None
    """None when INTERRUPTION_QUEUE is empty (interruption handling disabled)."""
    offerings: cache.UnavailableOfferings
    instance_status: instancestatus.InstanceStatusPoller
    """DescribeInstanceStatus as a second interruption source (needs no queue)."""
    janitor: Callable[[], Coroutine[Any, Any, None]]
    """The loop that deletes launch templates unused for a minute; the leader runs it (it deletes in EC2)."""
    tagger: Callable[[], Coroutine[Any, Any, None]]
    """The loop that tags registered instances with their node's and NodeClaim's names; the leader runs it."""
    calls: accounting.ApiCalls
    """Every AWS call of the parts above."""
    zonal_shifts: zonalshift.ZonalShifts | None = None
    """The cluster's ARC zonal shifts; None unless ENABLE_ZONAL_SHIFT."""
    check: Callable[[], Coroutine[Any, Any, None]] | None = None
    """Start-up check: with ENABLE_ZONAL_SHIFT, the cluster must be registered with ARC zonal shift."""
    reachable: Callable[[], Coroutine[Any, Any, str | None]] | None = None
    """Upstream's EC2 connectivity check (`startup.ec2_unreachable` on this EC2 client): None, or the reason."""


def build(
    *,
    settings: provider.Settings,
    interruption_queue: str,
    clock: Callable[[], float],
    nodeclass_lookup: Callable[[str], ec2nodeclass.EC2NodeClass | None],
    nodeclaims: Callable[[], Iterable[nodeclaim.NodeClaim]],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Built:
    aws = clients.build_clients(region=settings.region)
    shifts = None
    if settings.enable_zonal_shift:
        arc = clients.arc_zonal_shift_client(aws, region=settings.region)
        shifts = zonalshift.ZonalShifts(client=arc, eks=aws.eks, cluster_name=settings.cluster_name, clock=clock)
    cloud = provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=clock,
            settings=settings,
            nodeclass_lookup=nodeclass_lookup,
            nodeclaims=nodeclaims,
            sleep=sleep,
            zonal_shifts=shifts,
        )
    )
    queue = (
        aws_interruption_queue.InterruptionQueue(aws=aws, queue_name=interruption_queue) if interruption_queue else None
    )
    poller = instancestatus.InstanceStatusPoller(aws=aws, clock=clock, sleep=sleep)
    janitor = functools.partial(cloud.launch_templates.run_janitor, sleep=sleep)
    return Built(
        provider=cloud,
        queue=queue,
        offerings=cloud.unavailable,
        instance_status=poller,
        janitor=janitor,
        tagger=cloud.tagger.run,
        calls=aws.calls,
        zonal_shifts=shifts,
        check=shifts.start if shifts is not None else None,
        reachable=functools.partial(startup.ec2_unreachable, aws.ec2),
    )
