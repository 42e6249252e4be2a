"""The NodeOverlay controller (NodeOverlay gate): evaluates every overlay against every NodePool's instance types,
swaps the result into the `Overlays` that listings and launches apply, and writes each overlay's
ValidationSucceeded and Ready conditions (core: pkg/controllers/nodeoverlay/controller.go).

One reconcile handles every overlay at once (the conflicts are between overlays), so its queue has a single key;
a change of any NodeOverlay, NodePool or EC2NodeClass in the state cache queues it (upstream watches the same
three), and it runs again every six hours as upstream's does. The decisions are `karpy.cloudprovider.overlay`'s;
this module reads the cache, lists instance types and writes statuses.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.api import meta, nodeoverlay, status
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import overlay, types
from karpy.kube import client, resources
from karpy.nodeclaim import conditions as nodeclaim_conditions
from karpy.nodepool import status as nodepool_status
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

KEY: Final = "nodeoverlays"
"""The one key of the NodeOverlay queue."""
RESYNC: Final = 6 * 3600.0
"""Seconds between evaluations with no change (upstream: RequeueAfter 6h)."""
RETRY: Final = 30.0
"""Seconds before evaluating again when a NodePool's instance types could not be listed."""
TRIGGERS: Final = frozenset({resources.NODEOVERLAYS, resources.NODEPOOLS, resources.EC2NODECLASSES})
CONFLICT_MESSAGE: Final = "conflict with another overlay"


class NodeOverlayController:
    def __init__(
        self,
        kube: client.KubeClient,
        cluster: state_cluster.Cluster,
        *,
        cloud: types.CloudProvider,
        overlays: overlay.Overlays,
        clock: karpy_clock.Clock,
    ) -> None:
        self._kube = kube
        self._cluster = cluster
        self._cloud = cloud
        """The provider without the overlays: they are evaluated against the list prices."""
        self._overlays = overlays
        self._clock = clock

    def listener(self, enqueue: Callable[[str], None]) -> state_cluster.Listener:
        """A state-cache listener that queues (`enqueue(KEY)`) an evaluation on every change that can alter one."""

        def changed(
            res: resources.Resource, _before: Mapping[str, Any] | None, _after: Mapping[str, Any] | None
        ) -> None:
            if res in TRIGGERS:
                enqueue(KEY)

        return changed

    async def reconcile(self, _key: str = KEY) -> float:
        pools = self._cluster.nodepools()
        listed: dict[str, Sequence[types.InstanceType]] = {}
        failed = False
        for pool in pools:
            try:
                listed[pool.name] = await self._cloud.instance_types(pool)
            except cloudprovider_errors.CloudProviderError as error:
                # One broken pool (its node class missing, say) leaves the others evaluated (upstream alike).
                failed = True
                log.warning(
                    "nodeoverlays not evaluated for a nodepool", extra={"nodepool": pool.name, "error": str(error)}
                )
        valid = self._cluster.nodeoverlays()
        evaluation = overlay.evaluate(valid, pools, listed)
        self._overlays.store = evaluation.store
        now = self._clock.now()
        for item in valid:
            verdict = (
                (nodeclaim_conditions.FALSE, nodeoverlay.REASON_CONFLICT, CONFLICT_MESSAGE)
                if item.name in evaluation.conflicting
                else (nodeclaim_conditions.TRUE, "", "")
            )
            await self._write(item.name, verdict, now=now)
        for name, problem in self._cluster.nodeoverlay_errors().items():
            await self._write(
                name, (nodeclaim_conditions.FALSE, nodeoverlay.REASON_RUNTIME_VALIDATION, problem), now=now
            )
        return RETRY if failed else RESYNC

    async def _write(self, name: str, verdict: tuple[str, str, str], *, now: float) -> None:
        raw = self._cluster.raw(resources.NODEOVERLAYS, name)
        if raw is None:
            return
        patch = status_patch(raw, verdict, now=now)
        if patch is None:
            return
        with contextlib.suppress(client.NotFound):  # deleted since: its event queues the next evaluation
            await self._kube.patch(resources.NODEOVERLAYS, name, patch, subresource="status")


def conditions(
    previous: tuple[meta.Condition, ...], verdict: tuple[str, str, str], *, now: float, generation: int
) -> tuple[meta.Condition, ...]:
    """ValidationSucceeded as `verdict` (status, reason, message) says, and Ready following it."""
    state, reason, message = verdict
    out = nodeclaim_conditions.set_condition(
        previous,
        nodeoverlay.VALIDATION_SUCCEEDED,
        state,
        now=now,
        reason=reason,
        message=message,
        observed_generation=generation,
    )
    return nodeclaim_conditions.set_condition(
        out, nodeoverlay.READY, state, now=now, reason=reason, message=message, observed_generation=generation
    )


def status_patch(raw: Mapping[str, Any], verdict: tuple[str, str, str], *, now: float) -> dict[str, Any] | None:
    """The status-subresource merge patch for one overlay, or None when its conditions already say so."""
    generation = int((raw.get("metadata") or {}).get("generation") or 0)
    wanted = status.conditions(
        conditions(nodepool_status.observed_conditions(raw), verdict, now=now, generation=generation)
    )
    if nodepool_status.same_conditions((raw.get("status") or {}).get("conditions"), wanted):
        return None
    return {"status": {"conditions": wanted}}
