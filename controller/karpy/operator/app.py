"""Run the controller: the informers (the one watch of each resource), leader election, the HTTP servers, and the
leader's loops, until the stop flag is set.

Watch events reach the work queues through the state cache's listener (`karpy.runtime.routing.listener`, added by
`karpy.wiring.graph.build`), so each resource has exactly one watch stream per replica and nothing is written on
the objects but what upstream writes. The queues' workers and the singleton loops (provisioner, disruption,
interruption, garbage collection) run only while this replica holds the leader Lease; followers keep their informers
warm. A leader that loses the Lease stops everything and `run` raises LeadershipLost: `karpy run` exits (code 1) and
is restarted as a follower, as upstream does. `kopf.operator` is not run: with no resource handlers it would only
add its API discovery requests at start and its own signal handling (docs/ARCHITECTURE.md, "Kopf's part").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from karpy import settings as karpy_settings
from karpy import tasks
from karpy.runtime import explaining, leadership, parts, servers

log = logging.getLogger(__name__)

REACHABLE_RETRY: Final = (5.0, 60.0)
"""Seconds before the cloud's connectivity check is tried again: the first wait, doubled up to the second."""


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    host: str = "0.0.0.0"
    metrics_port: int = 8080
    health_port: int = 8081


@dataclasses.dataclass(slots=True)
class CloudReadiness:
    """The cloud side's readiness check: why it is not reachable (`reason`), until its check passed once."""

    reason: str = ""

    def __call__(self) -> bool | str:
        return self.reason or True


def readiness(ctrl: parts.Controller, cloud: CloudReadiness | None = None) -> dict[str, servers.Check]:
    checks: dict[str, servers.Check] = {
        "informers": ctrl.cluster.synced,
        "leader-election": lambda: ctrl.elector.observed_once,
    }
    if cloud is not None:
        checks["cloud-provider"] = cloud
    return checks


async def until_reachable(ctrl: parts.Controller, cloud: CloudReadiness, *, stop: asyncio.Event) -> bool:
    """Run the cloud's connectivity check until it passes (True) or `stop` is set (False), keeping the reason in
    `cloud` meanwhile. Upstream exits on a failed check (aws: pkg/operator/operator.go); staying up instead keeps
    the reason on /readyz and in the log while the Deployment waits, rather than in a crash loop."""
    if ctrl.cloud.reachable is None:
        return True
    delay, longest = REACHABLE_RETRY
    while True:
        reason = await ctrl.cloud.reachable()
        if reason is None:
            cloud.reason = ""
            return True
        cloud.reason = reason
        log.error("the cloud provider cannot be used; checking again in %.0f s: %s", delay, reason)
        waiting = [asyncio.create_task(stop.wait()), asyncio.create_task(ctrl.clock.sleep(delay))]
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await tasks.cancel_and_wait(waiting)
        if stop.is_set():
            return False
        delay = min(delay * 2, longest)


async def run(
    ctrl: parts.Controller,
    *,
    stop: asyncio.Event,
    endpoints: Endpoints,
    on_bound: Callable[[int, int], Awaitable[None] | None] | None = None,
) -> None:
    """Run until `stop` is set (or the caller cancels); then stop everything and release the Lease.

    Raises leadership.LeadershipLost (after the same orderly stop) when this replica led and lost the Lease, and
    `cloudprovider.errors.StartupCheckFailed` before anything runs when the cloud side's start-up check fails. The
    servers answer before the cloud is reachable (`until_reachable`): /readyz gives the reason meanwhile."""
    if ctrl.cloud.check is not None:
        await ctrl.cloud.check()
    cloud = CloudReadiness("not checked yet" if ctrl.cloud.reachable is not None else "")
    async with (
        servers.serving(
            servers.metrics_app(
                ctrl.metrics.scrape,
                explain_node=functools.partial(explaining.node, explaining.source(ctrl)),
            ),
            host=endpoints.host,
            port=endpoints.metrics_port,
        ) as metrics_port,
        servers.serving(
            servers.health_app(readiness(ctrl, cloud)), host=endpoints.host, port=endpoints.health_port
        ) as health_port,
    ):
        if on_bound is not None:
            bound = on_bound(metrics_port, health_port)
            if bound is not None:
                await bound
        if not await until_reachable(ctrl, cloud, stop=stop):
            return
        background = leadership.start(ctrl)
        stopping = asyncio.create_task(stop.wait(), name="stop flag")
        try:
            await asyncio.wait([stopping, *background], return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Our own tasks only, and a cancellation of the caller goes through (karpy.tasks).
            await tasks.cancel_and_wait([stopping])
            results = await leadership.cancel(background)
            with contextlib.suppress(Exception):
                await ctrl.recorder.flush()
        leadership.raise_ending(background, results)


def endpoints_from(settings: karpy_settings.Settings) -> Endpoints:
    return Endpoints(metrics_port=settings.runtime.metrics_port, health_port=settings.runtime.health_probe_port)
