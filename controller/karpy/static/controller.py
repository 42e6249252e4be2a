"""The static-pool reconciler: one NodePool by name, scaled towards `spec.replicas` (`static.provisioning` up,
`static.deprovisioning` down), counted as the state cache counts a pool (`state.nodepoolstate`).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from karpy import clock as karpy_clock
from karpy.kube import client as kube_client
from karpy.state import cluster as state_cluster
from karpy.state import nodepoolstate
from karpy.static import deprovisioning, provisioning

REQUEUE: Final = 60.0
"""Seconds between checks of a static pool with nothing to do (upstream requeues after a minute)."""
SYNC_RETRY: Final = 1.0
"""Seconds before trying again while the state cache is not synced (upstream: one second)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The static-pool reconciler's collaborators: it launches through the provisioner's `create`, records nothing."""

    client: kube_client.KubeClient
    cluster: state_cluster.Cluster
    clock: karpy_clock.Clock
    create: provisioning.Create
    dry_run: bool = False
    """Deletions go through a dry-run client and only log; the state cache is then not marked either."""


class StaticPoolController:
    """Reconcile one static NodePool by name (the operator's work queue calls it on pool and claim events)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def reconcile(self, name: str) -> float | None:
        """Scale the pool towards its replicas; seconds until the next check (None: not a static pool)."""
        deps = self._deps
        pool = deps.cluster.nodepool(name)
        if pool is None or pool.replicas is None or pool.metadata.deletion_timestamp is not None:
            return None
        if not deps.cluster.synced():
            # Counting against a partial cache would launch nodes the pool already has.
            return SYNC_RETRY
        nodes = nodepoolstate.pool_nodes(deps.cluster.state_nodes(), name)
        found = nodepoolstate.counts(nodes)
        if found.active > pool.replicas:
            await deprovisioning.scale_down(
                pool,
                nodes,
                found.active - pool.replicas,
                client=deps.client,
                cluster=deps.cluster,
                clock=deps.clock,
                dry_run=deps.dry_run,
            )
        elif provisioning.ready(pool):
            await provisioning.scale_up(pool, found, deps.create)
        return REQUEUE
