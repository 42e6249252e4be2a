"""Scale a static pool up (core: pkg/controllers/static/provisioning/controller.go): while active + pending <
replicas, create the difference, no more than the pool's `limits.nodes` leaves beside active + deleting + pending.
The claims carry the pool's requirements only: the cloud provider picks the instance at launch, no pod is scheduled
for them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

from karpy.api import meta, nodepool
from karpy.scheduling import catalog, results
from karpy.state import nodepoolstate

log = logging.getLogger(__name__)

READY: Final = "Ready"

Create = Callable[[Sequence[results.PlannedNodeClaim], Mapping[str, nodepool.NodePool]], Awaitable[object]]
"""Create NodeClaims for plans (the provisioner's `create_nodeclaims`: limits, metrics, the in-flight record)."""


def ready(pool: nodepool.NodePool) -> bool:
    """Usable for launches: Ready not explicitly False (as `provisioning.snapshot.schedulable_pools` decides)."""
    found = meta.condition(pool.status.conditions, READY)
    return found is None or found.status != "False"


def to_create(pool: nodepool.NodePool, found: nodepoolstate.Counts) -> int:
    """NodeClaims to create now: the replicas missing, within the node limit."""
    missing = (pool.replicas or 0) - found.active - found.pending
    room = nodepoolstate.headroom(pool, found)
    return max(0, missing if room is None else min(missing, room))


async def scale_up(pool: nodepool.NodePool, found: nodepoolstate.Counts, create: Create) -> None:
    wanted = (pool.replicas or 0) - found.active - found.pending
    count = to_create(pool, found)
    if wanted > 0 and count == 0:
        log.info("nodepool node limit reached", extra={"nodepool": pool.name, "limit": nodepoolstate.node_limit(pool)})
    if count <= 0:
        return
    log.info(
        "provisioning nodeclaims to satisfy replica count",
        extra={"nodepool": pool.name, "current": found.active, "desired": pool.replicas, "provision-count": count},
    )
    await create([catalog.static_plan(pool) for _ in range(count)], {pool.name: pool})
