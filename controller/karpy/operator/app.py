"""Run the controller: informers, leader election, HTTP servers, and Kopf with our handlers.

Kopf watches NodeClaims, Nodes, NodePools and EC2NodeClasses and its handlers only enqueue names into work queues
(`@kopf.on.event`, so Kopf writes nothing on the objects: no progress annotations on Nodes, and Karpenter's own
finalizers `karpenter.sh/termination` / `karpenter.k8s.aws/termination` are managed by the reconcilers, never by
Kopf). The queues' workers and the singleton loops (provisioner, disruption, interruption, garbage collection)
run only while this replica holds the leader Lease; followers keep their informers and Kopf watches warm. A leader
that loses the Lease stops everything and `run` raises LeadershipLost: `karpy run` exits (code 1) and is restarted
as a follower, as upstream does. The provisioner is triggered by the state cache's watch events (`observers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import pathlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final

import kopf

from karpy import clock as clock_module
from karpy.api import labels
from karpy.kube import config, resources
from karpy.operator import servers, wiring
from karpy.operator import settings as settings_module
from karpy.state import informer

log = logging.getLogger(__name__)

KOPF_PREFIX: Final = "karpy.dev"
"""Annotation prefix for anything Kopf would persist (it persists nothing with event handlers only)."""
PRICE_REFRESH: Final = 300.0
SYNC_POLL: Final = 0.5


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


def _deleting_with_finalizer(body: Mapping[str, Any], finalizer: str) -> bool:
    meta = body.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or ())


def claims_for_node(ctrl: wiring.Controller, node: Mapping[str, Any]) -> list[str]:
    """The NodeClaims a Node belongs to (by providerID, else by status.nodeName) from the state cache's index."""
    return [claim.name for claim in ctrl.cluster.nodeclaims_for_node(node)]


def kopf_registry(ctrl: wiring.Controller, *, connection: kopf.ConnectionInfo) -> kopf.OperatorRegistry:
    """Handlers that route watch events to the work queues (wiring only)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return connection

    @kopf.on.event(labels.GROUP, labels.VERSION, "nodeclaims", registry=registry)
    async def nodeclaim_event(name: str, type: str, body: Mapping[str, Any], **_: Any) -> None:
        if type != "DELETED":
            ctrl.queue(wiring.NODECLAIMS).add(name)
        pool = ((body.get("metadata") or {}).get("labels") or {}).get(labels.LABEL_NODEPOOL)
        if pool:
            ctrl.queue(wiring.NODEPOOLS).add(pool)

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(name: str, type: str, body: Mapping[str, Any], **_: Any) -> None:
        if type != "DELETED" and _deleting_with_finalizer(body, labels.FINALIZER_TERMINATION):
            ctrl.queue(wiring.NODES).add(name)
        # Registration, Ready and startup taints move the NodeClaim's lifecycle: reconcile it now, not at its poll.
        for claim in claims_for_node(ctrl, body):
            ctrl.queue(wiring.NODECLAIMS).add(claim)

    @kopf.on.event(labels.GROUP, labels.VERSION, "nodepools", registry=registry)
    async def nodepool_event(name: str, type: str, **_: Any) -> None:
        if type != "DELETED":
            ctrl.queue(wiring.NODEPOOLS).add(name)

    if wiring.NODECLASSES in ctrl.queues:

        @kopf.on.event(labels.AWS_GROUP, labels.VERSION, "ec2nodeclasses", registry=registry)
        async def nodeclass_event(name: str, type: str, **_: Any) -> None:
            if type != "DELETED":
                ctrl.queue(wiring.NODECLASSES).add(name)
            for pool in ctrl.cluster.nodepools():  # NodeClassReady follows the class
                if pool.template.node_class_ref.name == name:
                    ctrl.queue(wiring.NODEPOOLS).add(pool.name)

    return registry


async def _wait_synced(ctrl: wiring.Controller) -> None:
    while not ctrl.cluster.synced():
        await ctrl.clock.sleep(SYNC_POLL)


def resync(ctrl: wiring.Controller) -> None:
    """Queue every known object: a new leader must not wait for the next change to reconcile what it inherited."""
    for name in [c.name for c in ctrl.cluster.nodeclaims()] + list(ctrl.cluster.nodeclaim_errors()):
        ctrl.queue(wiring.NODECLAIMS).add(name)
    for node in ctrl.cluster.objects(resources.NODES):
        if _deleting_with_finalizer(node, labels.FINALIZER_TERMINATION):
            ctrl.queue(wiring.NODES).add(str(node["metadata"]["name"]))
    for pool in ctrl.cluster.objects(resources.NODEPOOLS):
        ctrl.queue(wiring.NODEPOOLS).add(str(pool["metadata"]["name"]))
    if wiring.NODECLASSES in ctrl.queues:
        for nc in ctrl.cluster.objects(resources.EC2NODECLASSES):
            ctrl.queue(wiring.NODECLASSES).add(str(nc["metadata"]["name"]))


async def refresh_prices(ctrl: wiring.Controller) -> None:
    """Keep the cost gauges' price book current from the provider's instance types of each NodePool."""
    while True:
        for pool in ctrl.cluster.nodepools():
            try:
                ctrl.metrics.prices.update(await ctrl.cloud.provider.instance_types(pool))
            except Exception as error:  # prices are for metrics only: never let them stop the controller
                log.debug("price refresh for nodepool %s failed: %s", pool.name, error)
        await ctrl.clock.sleep(PRICE_REFRESH)


def singletons(ctrl: wiring.Controller) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
    """The loops only the leader runs, by name."""
    loops: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
        f"queue {name}": queue.run for name, queue in ctrl.queues.items()
    }
    loops["provisioner"] = ctrl.provisioner.run
    loops["disruption"] = ctrl.disruption.run
    loops["garbage collection"] = ctrl.nodeclaims.run_garbage_collection
    loops["prices"] = lambda: refresh_prices(ctrl)
    if ctrl.interruption is not None:
        loops["interruption"] = ctrl.interruption.run
    if ctrl.instance_status is not None:
        loops["instance status"] = ctrl.instance_status.run
    if ctrl.nodeclaim_conditions is not None:
        loops["nodeclaim conditions"] = ctrl.nodeclaim_conditions.run
    if ctrl.expiry is not None:
        loops["expiration"] = ctrl.expiry.run
    return loops


class LeadershipLost(Exception):
    """This replica led and lost the Lease: `karpy run` exits so that it restarts as a fresh follower."""


async def lead(ctrl: wiring.Controller) -> None:
    """Wait for leadership and run the singleton loops; raise LeadershipLost when the Lease is lost.

    Like upstream (controller-runtime exits on lost leadership), a deposed leader does not step down in place: its
    memory (batch window, nominations, the disruption orchestration queue, eviction backoff, in-flight calls that
    may still land) was built for a leadership it no longer has, and a fresh process is the one state that is
    certainly clean. The Deployment restarts the container, which campaigns again as a follower."""
    await ctrl.elector.elected.wait()
    ctrl.metrics.set_leader(True)
    log.info("became leader; starting controllers", extra={"identity": ctrl.elector.identity})
    tasks = [asyncio.create_task(loop(), name=name) for name, loop in singletons(ctrl).items()]
    deposed = asyncio.create_task(ctrl.elector.deposed.wait())
    try:
        await _wait_synced(ctrl)
        resync(ctrl)
        done, _ = await asyncio.wait([*tasks, deposed], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not deposed and not task.cancelled() and task.exception() is not None:
                raise RuntimeError(f"controller loop {task.get_name()!r} failed") from task.exception()
        log.error("leader election lost; stopping controllers", extra={"identity": ctrl.elector.identity})
        raise LeadershipLost(f"{ctrl.elector.identity} lost the leader Lease")
    finally:
        for task in [*tasks, deposed]:
            task.cancel()
        await asyncio.gather(*tasks, deposed, return_exceptions=True)
        for queue in ctrl.queues.values():
            queue.clear()
        ctrl.metrics.set_leader(False)


def readiness(ctrl: wiring.Controller) -> dict[str, servers.Check]:
    return {
        "informers": ctrl.cluster.synced,
        "leader-election": lambda: ctrl.elector.observed_once,
    }


async def run(
    ctrl: wiring.Controller,
    *,
    connection: kopf.ConnectionInfo,
    stop: asyncio.Event,
    endpoints: Endpoints,
    ready: asyncio.Event | None = None,
    on_bound: Callable[[int, int], Awaitable[None] | None] | None = None,
) -> None:
    """Run until `stop` is set (or SIGTERM reaches Kopf); then stop everything and release the Lease.

    Raises LeadershipLost (after the same orderly stop) when this replica led and lost the Lease."""
    async with (
        servers.serving(
            servers.metrics_app(ctrl.metrics.exposition), host=endpoints.host, port=endpoints.metrics_port
        ) as metrics_port,
        servers.serving(
            servers.health_app(readiness(ctrl)), host=endpoints.host, port=endpoints.health_port
        ) as health_port,
    ):
        if on_bound is not None:
            bound = on_bound(metrics_port, health_port)
            if bound is not None:
                await bound
        background = [
            asyncio.create_task(informer.run_informers(ctrl.kube, ctrl.cluster), name="informers"),
            asyncio.create_task(ctrl.elector.run(), name="leader election"),
            asyncio.create_task(ctrl.recorder.run(), name="event recorder"),
            asyncio.create_task(lead(ctrl), name="leader loops"),
        ]
        operator = asyncio.create_task(
            kopf.operator(
                registry=kopf_registry(ctrl, connection=connection),
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
            for task in [*background, stopping]:
                task.cancel()
            results = await asyncio.gather(*background, return_exceptions=True)
            await asyncio.gather(stopping, return_exceptions=True)
            with contextlib.suppress(asyncio.CancelledError):
                await operator
            with contextlib.suppress(Exception):
                await ctrl.recorder.flush()
        for task, result in zip(background, results, strict=True):
            if isinstance(result, LeadershipLost):
                raise result
            if isinstance(result, Exception):
                raise RuntimeError(f"{task.get_name()} failed") from result


def endpoints_from(settings: settings_module.Settings) -> Endpoints:
    return Endpoints(metrics_port=settings.runtime.metrics_port, health_port=settings.runtime.health_probe_port)


def system_clock() -> clock_module.Clock:
    return clock_module.SystemClock()
