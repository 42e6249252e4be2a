"""Tell each NodePool when an ARC zonal shift starts or ends in a zone it can launch into (aws:
pkg/controllers/arczonalshift/controller.go, events in pkg/cloudprovider/events/events.go).

A leader-only loop: every 30 s it reads the cluster's shifts from a `ShiftSource` (the AWS provider's, which also
keeps launches out of the shifted zones) and, when the set of shifted zone ids changed, records ZonalShiftActive
(Warning) or ZonalShiftCleared (Normal) on every NodePool whose node class has a subnet in the zone and whose
requirements allow it. Shifts are keyed by zone id and requirements usually by zone name: the node class's subnets
map one to the other. The set is advanced only after the events were recorded, so a failed read retries the same
transitions next time. Pure selection (`transitions`) and a thin loop; no cloud provider or kopf imports.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from karpy import clock as karpy_clock
from karpy import events, requirements
from karpy.api import ec2nodeclass, labels, nodepool
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

PERIOD: Final = 30.0
"""Seconds between reads of the cluster's zonal shifts (upstream's RequeueAfter)."""
ZONAL_SHIFT_ACTIVE: Final = "ZonalShiftActive"
ZONAL_SHIFT_CLEARED: Final = "ZonalShiftCleared"


class ShiftSource(Protocol):
    async def update(self) -> None:
        """Read the cluster's shifts now; raises when they cannot be read."""
        ...

    def shifted_zones(self) -> frozenset[str]:
        """The zone ids shifted away from now, as of the last `update`."""
        ...


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


def transitions(
    previous: frozenset[str],
    current: frozenset[str],
    pools: Iterable[tuple[nodepool.NodePool, Mapping[str, str]]],
) -> list[ZonalShiftEvent]:
    """The events of a change from `previous` to `current` shifted zone ids, for pools with their zones (id →
    name), in pool then zone order."""
    changes = (
        (current - previous, events.EventType.WARNING, ZONAL_SHIFT_ACTIVE, "detected", "unavailable"),
        (previous - current, events.EventType.NORMAL, ZONAL_SHIFT_CLEARED, "cleared", "restored"),
    )
    out = []
    for pool, zones in pools:
        for zone_ids, type_, reason, what, offerings in changes:
            for zone_id in sorted(zone_ids):
                if (zone := affected_zone(pool, zones, zone_id)) is not None:
                    message = f"Zonal shift {what}: offerings in zone {zone} ({zone_id}) are {offerings}"
                    out.append(ZonalShiftEvent(pool, type_, reason, f"{message} for this NodePool"))
    return out


def _pool_ref(pool: nodepool.NodePool) -> dict[str, Any]:
    return {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodePool",
        "metadata": {"name": pool.name, "uid": pool.metadata.uid},
    }


class ZonalShiftController:
    def __init__(
        self,
        source: ShiftSource,
        cluster: state_cluster.Cluster,
        *,
        recorder: events.Recorder,
        clock: karpy_clock.Clock,
    ) -> None:
        self._source = source
        self._cluster = cluster
        self._recorder = recorder
        self._clock = clock
        self._previous: frozenset[str] = frozenset()

    def _pools(self) -> Sequence[tuple[nodepool.NodePool, Mapping[str, str]]]:
        classes = self._cluster.nodeclasses()
        return [(p, zones_of(classes.get(p.template.node_class_ref.name))) for p in self._cluster.nodepools()]

    async def reconcile(self) -> list[ZonalShiftEvent]:
        """Read the shifts and record the events of what changed since the last successful pass."""
        await self._source.update()
        current = self._source.shifted_zones()
        published = transitions(self._previous, current, self._pools()) if current != self._previous else []
        for event in published:
            self._recorder.record(_pool_ref(event.pool), event.type, event.reason, event.message)
        self._previous = current  # only now: a failed read above leaves the same transitions for the next pass
        return published

    async def run(self) -> None:
        """Forever (cancel to stop); the leader runs it."""
        while True:
            try:
                await self.reconcile()
            except Exception as exc:  # an unreadable shift must not stop the leader's other loops
                log.error("reading zonal shifts failed, retrying in %.0f s: %s", PERIOD, exc)
            await self._clock.sleep(PERIOD)
