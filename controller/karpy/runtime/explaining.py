"""`GET /explain/node/<name>` on the metrics port: the running controller explains one node from its own state
cache, cloud provider, disruption queue and settings, in the JSON of `karpy explain --node NAME -o json`
(`karpy.explain.report`). Wiring only: the explanation is `karpy.explain.run`'s.

The cluster is read on the event loop (it is the loop's); the simulations run in a worker thread, on a snapshot
nothing else changes, so watches and reconcilers keep going meanwhile. Read-only: nothing is written, no event
is published, the disruption methods' own memos are not touched (explain runs fresh ones).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as karpy_clock
from karpy.cloudprovider import errors, types
from karpy.explain import report, run
from karpy.runtime import parts
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

NOT_SYNCED = 503
NOT_FOUND = 404
OK = 200


@dataclass(frozen=True, slots=True)
class Source:
    """What the endpoint reads: the controller's own parts."""

    cluster: state_cluster.Cluster
    cloud: types.CloudProvider
    clock: karpy_clock.Clock
    queued: Callable[[], frozenset[str]]
    """NodeClaims the disruption queue is disrupting now (they are no candidates)."""
    options: run.Options


def source(ctrl: parts.Controller) -> Source:
    s = ctrl.settings
    return Source(
        cluster=ctrl.cluster,
        cloud=ctrl.cloud.provider,
        clock=ctrl.clock,
        queued=ctrl.disruption.queue.names,
        options=run.Options(
            spot_to_spot=s.feature_gates.spot_to_spot_consolidation,
            scheduling=s.scheduling,
        ),
    )


async def _instance_types(src: Source) -> tuple[dict[str, Sequence[types.InstanceType]], list[str]]:
    found: dict[str, Sequence[types.InstanceType]] = {}
    warnings = []
    for pool in src.cluster.nodepools():
        try:
            found[pool.name] = list(await src.cloud.instance_types(pool))
        except errors.CloudProviderError as error:  # as disruption: the pool's nodes are no candidates then
            warnings.append(f"nodepool {pool.name}: instance types unavailable: {error}")
    return found, warnings


async def node(src: Source, name: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body): the explanation of node `name`, 404 when there is none, 503 before the first sync."""
    if not src.cluster.synced():
        return NOT_SYNCED, {"error": "the cluster state is not synced yet"}
    instance_types, warnings = await _instance_types(src)
    options = run.Options(node=name, spot_to_spot=src.options.spot_to_spot, scheduling=src.options.scheduling)
    try:
        prepared = run.prepare(src.cluster, instance_types, clock=src.clock, options=options, queued=src.queued())
    except run.NotFound as missing:
        return NOT_FOUND, {"error": str(missing)}
    found = await asyncio.to_thread(run.explain, prepared, warnings=warnings)
    return OK, report.to_json(found)
