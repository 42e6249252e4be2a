"""Tell each NodePool when an ARC zonal shift starts or ends in a zone it can launch into (aws:
pkg/controllers/arczonalshift/controller.go, events in pkg/cloudprovider/events/events.go).

A leader-only loop: every 30 s it reads the cluster's shifts from a `ShiftSource` (the AWS provider's, which also
keeps launches out of the shifted zones) and records ZonalShiftActive (Warning) on every NodePool whose node class
has a subnet in a newly shifted zone and whose requirements allow it, and ZonalShiftCleared (Normal) on the same
pools when the shift ends. Shifts are keyed by zone id and requirements usually by zone name: the node class's
subnets map one to the other. A failed read changes nothing, so the next pass records the same transitions.

Upstream compares one cluster-wide set of shifted zones between passes; karpy remembers per NodePool which zones it
announced, so a pool whose node class resolves (or that is created) while a shift lasts is told as well instead of
never, and is told of the end only of what it was told of. Pure selection (`transitions`) and a thin loop; no cloud
provider or kopf imports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from karpy import clock as karpy_clock
from karpy import events, requirements
from karpy.api import ec2nodeclass, labels, nodepool
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

PERIOD: Final = 30.0
"""Seconds between reads of the cluster's zonal shifts (upstream's RequeueAfter)."""
ZONAL_SHIFT_ACTIVE: Final = "ZonalShiftActive"
ZONAL_SHIFT_CLEARED: Final = "ZonalShiftCleared"


@dataclass(frozen=True, slots=True)
class ZonalShiftEvent:
    pool: nodepool.NodePool
    type: events.EventType
    reason: str
    message: str


def zones_of(nodeclass: ec2nodeclass.EC2NodeClass | None) -> dict[str, str]:
    """Zone id → zone name of the node class's subnets (none when the class is missing: it launches nowhere)."""
    if nodeclass is None:
        return {}
    return {subnet.zone_id: subnet.zone for subnet in nodeclass.status.subnets if subnet.zone_id}


def affected_zone(pool: nodepool.NodePool, zones: Mapping[str, str], zone_id: str) -> str | None:
    """The name of the shifted zone when `pool` can launch into it: the node class has a subnet there and the
    pool's requirements on zone name and zone id both allow it (a key the pool does not constrain allows any)."""
    zone = zones.get(zone_id)
    if zone is None:
        return None
    reqs = requirements.Requirements.from_node_selector(pool.template.requirements)
    for key, value in ((labels.LABEL_ZONE, zone), (labels.LABEL_ZONE_ID, zone_id)):
        req = reqs.get(key)
        if req is not None and not req.has(value):
            return None
    return zone


def _event(pool: nodepool.NodePool, zone: str, zone_id: str, *, active: bool) -> ZonalShiftEvent:
    what, offerings = ("detected", "unavailable") if active else ("cleared", "restored")
    message = f"Zonal shift {what}: offerings in zone {zone} ({zone_id}) are {offerings} for this NodePool"
    if active:
        return ZonalShiftEvent(pool, events.EventType.WARNING, ZONAL_SHIFT_ACTIVE, message)
    return ZonalShiftEvent(pool, events.EventType.NORMAL, ZONAL_SHIFT_CLEARED, message)


def transitions(
    announced: Mapping[str, str],
    current: frozenset[str],
    pool: nodepool.NodePool,
    zones: Mapping[str, str],
) -> tuple[list[ZonalShiftEvent], dict[str, str]]:
    """The events of one pool, and the zones (id → name) announced to it afterwards: ZonalShiftActive for each zone
    of `current` the pool can use and was not told of, ZonalShiftCleared for each zone it was told of that is no
    longer shifted, in zone id order."""
    out = []
    still = {zone_id: zone for zone_id, zone in announced.items() if zone_id in current}
    for zone_id in sorted(current - still.keys()):
        if (zone := affected_zone(pool, zones, zone_id)) is not None:
            out.append(_event(pool, zone, zone_id, active=True))
            still[zone_id] = zone
    for zone_id in sorted(announced.keys() - current):
        out.append(_event(pool, announced[zone_id], zone_id, active=False))
    return out, still


class ZonalShiftController:
    def __init__(
        self,
        source: cloudprovider_parts.ShiftSource,
        cluster: state_cluster.Cluster,
        *,
        recorder: events.Recorder,
        clock: karpy_clock.Clock,
    ) -> None:
        self._source = source
        self._cluster = cluster
        self._recorder = recorder
        self._clock = clock
        self._announced: dict[str, dict[str, str]] = {}
        """NodePool uid → the shifted zones (id → name) it was told of with ZonalShiftActive."""

    async def reconcile(self) -> list[ZonalShiftEvent]:
        """Read the shifts and record, per NodePool, what changed since it was last told."""
        await self._source.update()
        current = self._source.shifted_zones()
        classes = self._cluster.nodeclasses()
        published, announced = [], {}
        for pool in self._cluster.nodepools():
            zones = zones_of(classes.get(pool.template.node_class_ref.name))
            told, announced[pool.metadata.uid] = transitions(
                self._announced.get(pool.metadata.uid, {}), current, pool, zones
            )
            published += told
        for event in published:
            self._recorder.record(nodepool.event_ref(event.pool), event.type, event.reason, event.message)
        self._announced = announced  # only now: a failed read above leaves the same transitions for the next pass
        return published

    async def run(self) -> None:
        """Forever (cancel to stop); the leader runs it."""
        while True:
            try:
                await self.reconcile()
            except Exception as exc:  # an unreadable shift must not stop the leader's other loops
                log.error("reading zonal shifts failed, retrying in %.0f s: %s", PERIOD, exc)
            await self._clock.sleep(PERIOD)
