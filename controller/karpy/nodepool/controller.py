"""The NodePool status/hash controller and the EC2NodeClass status/finalizer controller: thin async shells that
read the object from the API server, compute patches with `status` and `drift_hash` (pure) and apply them.

No reconciler package owns these two (they are small and mostly status bookkeeping); they depend only on the
KubeClient, the state cache and the node-class part of the cloud provider.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.api import errors, labels, meta, nodepool, parse
from karpy.kube import client, resources
from karpy.nodeclaim import registration as nodeclaim_registration
from karpy.nodepool import drift_hash
from karpy.nodepool import status as nodepool_status
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

NODEPOOL_RESYNC: Final = 60.0
"""Seconds between status refreshes of a NodePool with no event (usage also moves with its NodeClaims)."""


class NodePoolController:
    def __init__(
        self,
        kube: client.KubeClient,
        cluster: state_cluster.Cluster,
        *,
        clock: karpy_clock.Clock,
        registration: nodeclaim_registration.RegistrationHealth,
    ) -> None:
        self._kube = kube
        self._cluster = cluster
        self._clock = clock
        self._registration = registration

    def _registration_condition(
        self, raw: Mapping[str, Any], pool: nodepool.NodePool | None
    ) -> tuple[str, str, str] | None:
        """NodeRegistrationHealthy as the registration tracker decides it (None: no valid pool, or no node class)."""
        if pool is None or not pool.metadata.uid:
            return None
        nc = self._cluster.nodeclasses().get(pool.template.node_class_ref.name)
        if nc is None:
            return None  # upstream leaves the condition alone while the node class is missing
        previous = meta.condition(nodepool_status.observed_conditions(raw), nodepool_status.NODE_REGISTRATION_HEALTHY)
        observed = (raw.get("status") or {}).get("nodeClassObservedGeneration")
        stale = previous is not None and (
            previous.observed_generation != pool.metadata.generation
            or (observed is not None and observed != nc.metadata.generation)
        )
        wanted = self._registration.condition(pool.metadata.uid, previous, stale=stale)
        return wanted.status, wanted.reason, wanted.message

    async def reconcile(self, name: str) -> float | None:
        raw = await self._kube.get(resources.NODEPOOLS, name)
        if raw is None:
            return None
        try:
            pool, error = parse.nodepool(raw), ""
        except errors.ValidationError as invalid:
            pool, error = None, invalid.summary()
            log.error("nodepool failed validation: %s", error, extra={"nodepool": name, "error": error})
        if pool is not None and pool.metadata.deletion_timestamp is None:
            stamp = drift_hash.nodepool_stamp(pool)
            claims = [c for c in self._cluster.nodeclaims() if c.metadata.labels.get(labels.LABEL_NODEPOOL) == name]
            await drift_hash.restamp(self._kube, claims, stamp)
            annotations = drift_hash.hash_patch(pool.metadata, stamp)
            if annotations is not None:
                raw = await self._kube.patch(resources.NODEPOOLS, name, annotations)
        patch = nodepool_status.nodepool_status_patch(
            raw,
            pool=pool,
            validation_error=error,
            nodeclasses=self._cluster.nodeclasses(),
            usage=self._cluster.nodepool_usage(name),
            now=self._clock.now(),
            registration=self._registration_condition(raw, pool),
        )
        if patch is not None:
            await self._kube.patch(resources.NODEPOOLS, name, patch, subresource="status")
        return NODEPOOL_RESYNC
