"""The instance an earlier process launched for a NodeClaim, found again by the claim's name.

A merged CreateFleet is idempotent only for its whole set of owners (`ec2batch`): when one owner's providerID write
was lost and the controller restarted, the claim is launched again in another batch, under another ClientToken,
and EC2 makes a second instance. So every instance is tagged `karpenter.sh/nodeclaim: <name>` as soon as its
launch hands it out, before the lifecycle writes the providerID, and a launch that may repeat an earlier process's
(`CloudProvider.create(adopt=True)`) looks that tag up first and takes the instance over (`launched`).

Upstream writes the same tag later, after registration (aws: pkg/controllers/nodeclaim/tagging/controller.go); the
tagging controller then finds it present and writes only `Name`. The controller policy already allows it on a
launched instance (aws: the `AllowScopedResourceTagging` statement: `karpenter.sh/nodeclaim` among the tag keys).

Why a CreateTags per launch, and not cheaper: the tag cannot ride in the CreateFleet's TagSpecifications, which
upstream uses for its launch tags (aws: pkg/providers/instance/instance.go), because a merged fleet's request is
the same for all its claims and its instances are handed to claims only from the answer; and CreateTags puts one
set of tags on all its resources, so N claims' N names take N calls, batched or not. The calls of one answer run
concurrently (each claim's launch awaits its own), and an AWS call takes no virtual time: on moto, one launch at a
time costs one more call and ~6 ms of wall time, a scale-out no measurable time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy.api import labels
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import clients, instances, launch

log = logging.getLogger(__name__)


async def tag_claimed(ec2: Any, instance_id: str, claim_name: str) -> bool:
    """Tag a just-launched instance with its NodeClaim's name; whether it worked. A failure is logged, not raised:
    the launch stands (the tagging controller writes the tag after registration), only its recovery after a lost
    providerID write and a restart is lost."""
    try:
        await clients.call(
            ec2, "create_tags", Resources=[instance_id], Tags=[{"Key": labels.TAG_NODECLAIM, "Value": claim_name}]
        )
    except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
        log.warning("tagging instance %s with nodeclaim %s failed: %s", instance_id, claim_name, exc)
        return False
    return True


def launched(instance: Mapping[str, Any], instance_types: Sequence[types.InstanceType]) -> launch.Launched | None:
    """A described instance as the launch that made it would have answered (pure); None when its type is not
    among `instance_types`, the node class's catalog (its labels and capacity come from there)."""
    name = str(instance.get("InstanceType", ""))
    it = next((t for t in instance_types if t.name == name), None)
    if it is None:
        return None
    placement = instance.get("Placement") or {}
    return launch.Launched(
        instance_id=str(instance["InstanceId"]),
        instance_type=it,
        zone=str(placement.get("AvailabilityZone", "")),
        capacity_type=instances.capacity_type_of(instance),
        image_id=str(instance.get("ImageId", "")),
        reservation_id=str(instance.get("CapacityReservationId") or ""),
        subnet_id=str(instance.get("SubnetId", "")),
        placement_group_id=str(placement.get("GroupId") or ""),
    )
