"""Reserved capacity whose reservation ended runs on as on-demand: its NodeClaim and Node are relabelled, pure
(aws: pkg/controllers/capacityreservation/capacitytype/controller.go). Only that demotion is followed: an
on-demand instance is never promoted to reserved, as upstream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from karpy.api import labels, nodeclaim

RESERVED_LABELS: Final = (
    labels.LABEL_CAPACITY_RESERVATION_ID,
    labels.LABEL_CAPACITY_RESERVATION_TYPE,
    labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
)
"""Dropped with the demotion (upstream's ReservedCapacityLabels)."""


def demoted(
    claims: Iterable[nodeclaim.NodeClaim], instances: Iterable[nodeclaim.NodeClaim]
) -> list[nodeclaim.NodeClaim]:
    """Claims labelled reserved whose instance the cloud now reports on-demand; deleting claims are left alone (they
    are draining already)."""
    now_on_demand = {
        i.status.provider_id
        for i in instances
        if i.metadata.labels.get(labels.LABEL_CAPACITY_TYPE) == labels.CAPACITY_TYPE_ON_DEMAND
    }
    return [
        c
        for c in claims
        if c.metadata.deletion_timestamp is None
        and c.metadata.labels.get(labels.LABEL_CAPACITY_TYPE) == labels.CAPACITY_TYPE_RESERVED
        and c.status.provider_id in now_on_demand
    ]


def labels_patch() -> dict[str, Any]:
    """The merge patch for the claim and its Node: on-demand, without the reservation's labels."""
    changed: dict[str, Any] = {labels.LABEL_CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND}
    changed.update(dict.fromkeys(RESERVED_LABELS))
    return {"metadata": {"labels": changed}}
