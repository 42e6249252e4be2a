"""spec.capacityReservationSelectorTerms → DescribeCapacityReservations queries, and answers → status. Pure.

Terms are ORed, fields within a term ANDed (tags with "*" as "has the key", id, ownerID, instanceMatchCriteria).
Only reservations that can still take instances are kept: state `active` and not past their end date. A capacity
block within 40 minutes of its end is kept as `expiring`: nothing launches into it any more and its nodes drain
(aws: pkg/providers/capacityreservation, pkg/controllers/nodeclass/capacityreservation.go,
pkg/apis/v1/ec2nodeclass_status.go).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import selectors

USABLE_STATES = frozenset({"active"})
CAPACITY_BLOCK = "capacity-block"
ACTIVE = "active"
EXPIRING = ec2nodeclass.CAPACITY_RESERVATION_EXPIRING


def query(term: ec2nodeclass.CapacityReservationSelectorTerm) -> dict[str, Any]:
    """DescribeCapacityReservations arguments for one term."""
    fields = {"owner-id": term.owner_id, "instance-match-criteria": term.instance_match_criteria}
    out: dict[str, Any] = {"Filters": selectors.term_filters(term.tags, fields)}
    if term.id:
        out["CapacityReservationIds"] = [term.id]
    return out


def _epoch(value: object) -> float | None:
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return None


def from_describe(
    described: Iterable[Mapping[str, Any]], *, now: float
) -> tuple[ec2nodeclass.CapacityReservationStatus, ...]:
    """Usable reservations, unique by id, ordered by id; ones already past their end time are dropped."""
    seen: dict[str, ec2nodeclass.CapacityReservationStatus] = {}
    for cr in described:
        end = _epoch(cr.get("EndDate"))
        if str(cr.get("State", "")) not in USABLE_STATES or (end is not None and end <= now):
            continue
        kind = str(cr.get("ReservationType") or "default")
        expiring = (
            kind == CAPACITY_BLOCK and end is not None and now >= end - ec2nodeclass.CAPACITY_BLOCK_EXPIRATION_PERIOD
        )
        seen[str(cr["CapacityReservationId"])] = ec2nodeclass.CapacityReservationStatus(
            id=str(cr["CapacityReservationId"]),
            availability_zone=str(cr.get("AvailabilityZone", "")),
            instance_type=str(cr.get("InstanceType", "")),
            owner_id=str(cr.get("OwnerId", "")),
            instance_match_criteria=str(cr.get("InstanceMatchCriteria") or "open"),
            reservation_type=CAPACITY_BLOCK if kind == CAPACITY_BLOCK else "default",
            state=EXPIRING if expiring else ACTIVE,
            interruptible=bool(cr.get("Interruptible", False)),
            end_time=end,
        )
    return tuple(seen[k] for k in sorted(seen))


def available_counts(described: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """`AvailableInstanceCount` by reservation id, for the reservations whose answer carries one."""
    return {
        str(cr["CapacityReservationId"]): count
        for cr in described
        if isinstance(count := cr.get("AvailableInstanceCount"), int)
    }
