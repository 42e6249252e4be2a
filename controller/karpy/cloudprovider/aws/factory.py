"""Build everything the controller needs from AWS in one call, as the `CloudParts` the object graph uses: the
provider, the interruption queue and instance-status poller, the ICE cache, the janitor and tagger loops.

The operator's wiring imports this module when it starts with the AWS provider. boto3 reads `AWS_ENDPOINT_URL`
itself, so the same code runs against moto.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, nodeclaim
from karpy.cloudprovider import parts
from karpy.cloudprovider.aws import clients, instancestatus, models, provider, sessions, startup, zonalshift
from karpy.cloudprovider.aws import interruption_queue as aws_interruption_queue


def build(
    *,
    settings: provider.Settings,
    interruption_queue: str,
    clock: karpy_clock.Clock,
    nodeclass_lookup: Callable[[str], ec2nodeclass.EC2NodeClass | None],
    nodeclaims: Callable[[], Iterable[nodeclaim.NodeClaim]],
) -> parts.CloudParts:
    """`interruption_queue` is the SQS queue's name; empty: no queue (interruption handling disabled). With
    ENABLE_ZONAL_SHIFT the start-up check requires the cluster to be registered with ARC zonal shift."""
    # One for every client: each model and endpoint file loads once, cut down to the operations the controller calls.
    session = sessions.session(settings.region, operations=models.CALLED)
    aws = clients.build_clients(region=settings.region, session=session)
    shifts = None
    if settings.enable_zonal_shift:
        arc = clients.arc_zonal_shift_client(aws, region=settings.region, session=session)
        shifts = zonalshift.ZonalShifts(client=arc, eks=aws.eks, cluster_name=settings.cluster_name, clock=clock.now)
    cloud = provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=clock.now,
            settings=settings,
            nodeclass_lookup=nodeclass_lookup,
            nodeclaims=nodeclaims,
            sleep=clock.sleep,
            zonal_shifts=shifts,
        )
    )
    queue = (
        aws_interruption_queue.InterruptionQueue(aws=aws, queue_name=interruption_queue) if interruption_queue else None
    )
    poller = instancestatus.InstanceStatusPoller(aws=aws, clock=clock.now, sleep=clock.sleep)
    janitor = functools.partial(cloud.launch_templates.run_janitor, sleep=clock.sleep)
    return parts.CloudParts(
        provider=cloud,
        nodeclasses=cloud,
        queue=queue,
        offerings=cloud.unavailable,
        instance_status=poller,
        janitor=janitor,
        tagger=cloud.tagger.run,
        api_calls=aws.calls,
        use_overlays=cloud.use_overlays,
        use_kube_dns=cloud.use_kube_dns,
        zonal_shifts=shifts,
        check=shifts.start if shifts is not None else None,
        reachable=functools.partial(startup.ec2_unreachable, aws.ec2),
    )
