"""Run the controller: informers, leader election, HTTP servers, and Kopf with our handlers.

Kopf watches NodeClaims, Nodes, NodePools and EC2NodeClasses and its handlers only enqueue names into work queues
(`@kopf.on.event`, so Kopf writes nothing on the objects: no progress annotations on Nodes, and Karpenter's own
finalizers `karpenter.sh/termination` / `karpenter.k8s.aws/termination` are managed by the reconcilers, never by
Kopf). The queues' workers and the singleton loops (provisioner, disruption, interruption, garbage collection)
run only while this replica holds the leader Lease; followers keep their informers and Kopf watches warm. A leader
that loses the Lease stops everything and `run` raises LeadershipLost: `karpy run` exits (code 1) and is restarted
as a follower, as upstream does. The provisioner is triggered by the state cache's watch events (`observers`).
What the handlers queue and what the leader runs live in `loops`, shared with the in-process emulation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import pathlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import kopf

from karpy import clock as clock_module
from karpy import settings as settings_module
from karpy.kube import client, config, resources
from karpy.runtime import explaining, leadership, parts, routing, servers
from karpy.state import informer

log = logging.getLogger(__name__)

KOPF_PREFIX: Final = "karpy.dev"
"""Annotation prefix for anything Kopf would persist (it persists nothing with event handlers only)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    host: str = "0.0.0.0"
    metrics_port: int = 8080
    health_port: int = 8081


def kopf_settings() -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    s.posting.enabled = False  # our KubeRecorder writes Events, deduplicated like client-go
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    s.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=KOPF_PREFIX)
    s.persistence.finalizer = f"{KOPF_PREFIX}/kopf-finalizer"
    s.peering.standalone = True  # peering is not leader election; the Lease is
    s.watching.server_timeout = informer.WATCH_TIMEOUT
    return s


def connection_info(cfg: config.Config) -> kopf.ConnectionInfo:
    token = cfg.token or (pathlib.Path(cfg.token_file).read_text().strip() if cfg.token_file else "")
    return kopf.ConnectionInfo(
        server=cfg.server,
        token=token or None,
        ca_path=cfg.ca_file or None,
        ca_data=cfg.ca_data or None,
        certificate_path=cfg.client_cert_file or None,
        certificate_data=cfg.client_cert_data or None,
        private_key_path=cfg.client_key_file or None,
        private_key_data=cfg.client_key_data or None,
        insecure=cfg.insecure_skip_tls_verify or None,
        default_namespace=cfg.namespace,
    )


def kopf_registry(
    ctrl: parts.Controller, *, connection: kopf.ConnectionInfo, credentials: Callable[[], str] | None = None
) -> kopf.OperatorRegistry:
    """Handlers that hand watch events to `routing.route` (wiring only). Kopf logs in again when the API server
    answers 401: with a credential plugin (`config.Config.credentials`), that login carries its current token."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        if credentials is None:
            return connection
        return dataclasses.replace(connection, token=await asyncio.to_thread(credentials))

    def handler(res: resources.Resource) -> Callable[..., Awaitable[None]]:
        async def on_event(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
            routing.route(ctrl, res, type or client.ADDED, body)

        return on_event

    for res in routing.ROUTED:
        if res == resources.EC2NODECLASSES and parts.NODECLASSES not in ctrl.queues:
            continue
        kopf.on.event(res.group, res.version, res.plural, registry=registry, id=res.plural)(handler(res))
    return registry


def readiness(ctrl: parts.Controller) -> dict[str, servers.Check]:
    return {
        "informers": ctrl.cluster.synced,
        "leader-election": lambda: ctrl.elector.observed_once,
    }


async def run(
    ctrl: parts.Controller,
    *,
    connection: kopf.ConnectionInfo,
    stop: asyncio.Event,
    endpoints: Endpoints,
    ready: asyncio.Event | None = None,
    on_bound: Callable[[int, int], Awaitable[None] | None] | None = None,
    credentials: Callable[[], str] | None = None,
) -> None:
    """Run until `stop` is set (or SIGTERM reaches Kopf); then stop everything and release the Lease.

    Raises leadership.LeadershipLost (after the same orderly stop) when this replica led and lost the Lease."""
    async with (
        servers.serving(
            servers.metrics_app(
                ctrl.metrics.exposition,
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
        operator = asyncio.create_task(
            kopf.operator(
                registry=kopf_registry(ctrl, connection=connection, credentials=credentials),
                settings=kopf_settings(),
                clusterwide=True,
                standalone=True,
                stop_flag=stop,
                ready_flag=ready,
            ),
            name="kopf",
        )
        stopping = asyncio.create_task(stop.wait(), name="stop flag")
        try:
            await asyncio.wait([operator, stopping, *background], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()  # Kopf must stop through its flag: a cancelled Kopf schedules a SIGKILL
            # Our loops stop at once: Kopf otherwise waits 5 s for tasks it did not start ("hung" tasks).
            stopping.cancel()
            results = await leadership.cancel(background)
            await asyncio.gather(stopping, return_exceptions=True)
            with contextlib.suppress(asyncio.CancelledError):
                await operator
            with contextlib.suppress(Exception):
                await ctrl.recorder.flush()
        leadership.raise_ending(background, results)


def endpoints_from(settings: settings_module.Settings) -> Endpoints:
    return Endpoints(metrics_port=settings.runtime.metrics_port, health_port=settings.runtime.health_probe_port)


def system_clock() -> clock_module.Clock:
    return clock_module.SystemClock()
