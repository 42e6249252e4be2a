"""When a NodeClaim in a capacity block must start draining, pure: 40 minutes before the block ends, 10 minutes
before EC2 begins reclaiming its instances, so pods leave through the normal graceful termination (PDBs, grace
periods) instead of being cut off (aws: pkg/controllers/capacityreservation/expiration/controller.go,
pkg/apis/v1/ec2nodeclass_status.go CapacityReservationFromEC2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from karpy.api import ec2nodeclass, labels, nodeclaim

PRE_DRAIN: Final = ec2nodeclass.CAPACITY_BLOCK_EXPIRATION_PERIOD
"""Seconds before a capacity block's end its NodeClaims are deleted (upstream's expiration period)."""
CAPACITY_BLOCK: Final = "capacity-block"


def drain_at(claim: nodeclaim.NodeClaim, nodeclasses: Mapping[str, ec2nodeclass.EC2NodeClass]) -> float | None:
    """Epoch seconds the claim's capacity block makes it leave, or None (not in a capacity block, or the block's end
    is not known). The reservation is looked up in the claim's node class status, which keeps each selected
    reservation's type and end time until the reservation ends."""
    reservation_id = claim.metadata.labels.get(labels.LABEL_CAPACITY_RESERVATION_ID)
    if not reservation_id or claim.metadata.labels.get(labels.LABEL_CAPACITY_TYPE) != labels.CAPACITY_TYPE_RESERVED:
        return None
    nodeclass = nodeclasses.get(claim.spec.node_class_ref.name)
    if nodeclass is None:
        return None
    for reservation in nodeclass.status.capacity_reservations:
        if reservation.id == reservation_id:
            if reservation.reservation_type != CAPACITY_BLOCK or reservation.end_time is None:
                return None
            return reservation.end_time - PRE_DRAIN
    return None
