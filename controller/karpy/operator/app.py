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

from karpy import settings as karpy_settings
from karpy import tasks
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.runtime import explaining, leadership, parts, servers

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    host: str = "0.0.0.0"
    metrics_port: int = 8080
    health_port: int = 8081


def readiness(ctrl: parts.Controller) -> dict[str, servers.Check]:
    return {
        "informers": ctrl.cluster.synced,
        "leader-election": lambda: ctrl.elector.observed_once,
    }


async def check_cloud(ctrl: parts.Controller) -> None:
    """The cloud side's start-up checks, before anything runs. Upstream's EC2 connectivity check exits the process
    when it fails (aws: pkg/operator/operator.go, `CheckEC2Connectivity` then `os.Exit(1)`), and so does this: the
    reason is the container's last log line, which the chart's `terminationMessagePolicy: FallbackToLogsOnError`
    makes the pod status's termination message (`kubectl describe pod`, and what a deployer awaiting the pods
    reports); the kubelet's restart back-off then retries with the identity as it is by then."""
    if ctrl.cloud.reachable is not None:
        reason = await ctrl.cloud.reachable()
        if reason is not None:
            raise cloudprovider_errors.StartupCheckFailed(f"the cloud provider cannot be used: {reason}")
    if ctrl.cloud.check is not None:
        await ctrl.cloud.check()


async def run(
    ctrl: parts.Controller,
    *,
    stop: asyncio.Event,
    endpoints: Endpoints,
    on_bound: Callable[[int, int], Awaitable[None] | None] | None = None,
) -> None:
    """Run until `stop` is set (or the caller cancels); then stop everything and release the Lease.

    Raises leadership.LeadershipLost (after the same orderly stop) when this replica led and lost the Lease, and
    `cloudprovider.errors.StartupCheckFailed` before anything runs when a start-up check of the cloud side fails
    (`check_cloud`)."""
    await check_cloud(ctrl)
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
            servers.health_app(readiness(ctrl)), host=endpoints.host, port=endpoints.health_port
        ) as health_port,
    ):
        if on_bound is not None:
            bound = on_bound(metrics_port, health_port)
            if bound is not None:
                await bound
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
