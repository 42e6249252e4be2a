"""What a running controller does besides watching: how watch events become work, and what the leader runs.

Shared by `karpy run` (`app`) and the in-process emulation (`karpy_emulator.controlplane`), in both of which the
state cache's listener calls `routing.route`, so the demo, the end-to-end tests and the benchmark run exactly the
loops, resync and leadership rules of the real operator. No Kopf here.

Routing (upstream: each controller's watches and their mappings):
* a NodeClaim's change reconciles it and its NodePool's status;
* a Node's change reconciles the NodeClaims it belongs to (registration, Ready and startup taints move their
  lifecycle now, not at their poll), and a Node being deleted under our finalizer goes to termination;
* a NodePool's change reconciles its status, and (StaticCapacity) its replica count, as does any change of one of
  its NodeClaims (a deleted one must be replaced, an extra one removed);
* an EC2NodeClass's change reconciles its status and the status (NodeClassReady) of the NodePools using it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from karpy.api import labels
from karpy.kube import resources
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.runtime import parts, routing
from karpy.state import informer

log = logging.getLogger(__name__)

PRICE_REFRESH: Final = 300.0
"""Seconds between refreshes of the cost gauges' price book (the provider caches prices for longer)."""
SYNC_POLL: Final = 0.5


class LeadershipLost(Exception):
    """This replica led and lost the Lease: `karpy run` exits so that it restarts as a fresh follower."""


async def wait_synced(ctrl: parts.Controller) -> None:
    while not ctrl.cluster.synced():
        await ctrl.clock.sleep(SYNC_POLL)


def resync(ctrl: parts.Controller) -> None:
    """Queue every known object: a new leader must not wait for the next change to reconcile what it inherited."""
    for name in [c.name for c in ctrl.cluster.nodeclaims()] + list(ctrl.cluster.nodeclaim_errors()):
        ctrl.queue(parts.NODECLAIMS).add(name)
    for node in ctrl.cluster.objects(resources.NODES):
        if routing.deleting_with_finalizer(node, labels.FINALIZER_TERMINATION):
            ctrl.queue(parts.NODES).add(str(node["metadata"]["name"]))
    for pool in ctrl.cluster.objects(resources.NODEPOOLS):
        ctrl.queue(parts.NODEPOOLS).add(str(pool["metadata"]["name"]))
        if parts.STATIC_NODEPOOLS in ctrl.queues:
            ctrl.queue(parts.STATIC_NODEPOOLS).add(str(pool["metadata"]["name"]))
    if parts.NODECLASSES in ctrl.queues:
        for nc in ctrl.cluster.objects(resources.EC2NODECLASSES):
            ctrl.queue(parts.NODECLASSES).add(str(nc["metadata"]["name"]))
    if parts.NODEOVERLAYS in ctrl.queues:
        ctrl.queue(parts.NODEOVERLAYS).add(nodeoverlay_controller.KEY)
    if parts.CAPACITYBUFFERS in ctrl.queues:
        for buffer in ctrl.cluster.capacitybuffers():
            ctrl.queue(parts.CAPACITYBUFFERS).add(f"{buffer.namespace}/{buffer.name}")


async def refresh_prices(ctrl: parts.Controller) -> None:
    """Keep the cost gauges' price book current from the provider's instance types of each NodePool."""
    while True:
        for pool in ctrl.cluster.nodepools():
            try:
                ctrl.metrics.instance_types_listed(await ctrl.cloud.provider.instance_types(pool))
            except Exception as error:  # prices are for metrics only: never let them stop the controller
                log.debug("price refresh for nodepool %s failed: %s", pool.name, error)
        await ctrl.clock.sleep(PRICE_REFRESH)


def singletons(ctrl: parts.Controller) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
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
    loops["nodeclaim conditions"] = ctrl.nodeclaim_conditions.run
    loops["expiration"] = ctrl.expiration.run
    loops["nodeclaim consistency"] = ctrl.consistency.run
    if ctrl.repair is not None:
        loops["node repair"] = ctrl.repair.run
    if ctrl.cloud.janitor is not None:
        loops["launch template janitor"] = ctrl.cloud.janitor
    if ctrl.cloud.tagger is not None:
        loops["instance tagger"] = ctrl.cloud.tagger
    if ctrl.zonal_shift is not None:
        loops["zonal shift"] = ctrl.zonal_shift.run
    return loops


async def lead(ctrl: parts.Controller) -> None:
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
        await wait_synced(ctrl)
        resync(ctrl)
        done, _ = await asyncio.wait([*tasks, deposed], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not deposed and not task.cancelled() and task.exception() is not None:
                raise RuntimeError(f"controller loop {task.get_name()!r} failed") from task.exception()
        log.error("leader election lost; stopping controllers", extra={"identity": ctrl.elector.identity})
        raise LeadershipLost(f"{ctrl.elector.identity} lost the leader Lease")
    finally:
        await cancel([*tasks, deposed])
        for queue in ctrl.queues.values():
            queue.clear()
        ctrl.metrics.set_leader(False)


def informed(ctrl: parts.Controller) -> tuple[resources.Resource, ...]:
    """What the state cache watches: NodeOverlays, and CapacityBuffers with PodTemplates, too under their gates
    (without them their CRDs may be absent)."""
    out = informer.INFORMED
    if parts.NODEOVERLAYS in ctrl.queues:
        out = (*out, resources.NODEOVERLAYS)
    if parts.CAPACITYBUFFERS in ctrl.queues:
        out = (*out, resources.CAPACITYBUFFERS, resources.PODTEMPLATES)
    return out


def start(ctrl: parts.Controller) -> list[asyncio.Task[None]]:
    """What every replica runs for its whole life: the informers, the elector, the event recorder, and `lead`, which
    waits for the Lease before it starts the leader's loops."""
    return [
        asyncio.create_task(informer.run_informers(ctrl.kube, ctrl.cluster, informed(ctrl)), name="informers"),
        asyncio.create_task(ctrl.elector.run(), name="leader election"),
        asyncio.create_task(ctrl.recorder.run(), name="event recorder"),
        asyncio.create_task(lead(ctrl), name="leader loops"),
    ]


async def cancel(tasks: Sequence[asyncio.Task[Any]]) -> list[Any]:
    """Cancel `tasks` and wait for them; what each ended with (its result, its exception or a CancelledError)."""
    for task in tasks:
        task.cancel()
    return await asyncio.gather(*tasks, return_exceptions=True)


class TaskFailed(RuntimeError):
    """One of a replica's lifelong tasks (the informers, the elector, ...) ended with an error: `task` names it,
    `cause` is the error (the process entry tells the user which, in one line)."""

    def __init__(self, task: str, cause: Exception) -> None:
        super().__init__(f"{task} failed")
        self.task = task
        self.cause = cause


def raise_ending(tasks: Sequence[asyncio.Task[None]], results: Sequence[BaseException | None]) -> None:
    """After `cancel`: raise LeadershipLost when `lead` ended with it, else a TaskFailed naming the first task that
    failed; nothing when every task was only cancelled."""
    for task, result in zip(tasks, results, strict=True):
        if isinstance(result, LeadershipLost):
            raise result
        if isinstance(result, Exception):
            raise TaskFailed(task.get_name(), result) from result
