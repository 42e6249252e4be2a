"""What a running controller does besides watching: how watch events become work, and what the leader runs.

Shared by `karpy run` (`app`: Kopf's event handlers call `route`) and the in-process emulation
(`karpy.sim.controlplane`: the state cache's listener calls `route`), so the demo, the end-to-end tests and the
benchmark run exactly the loops, resync and leadership rules of the real operator. No Kopf here.

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
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final

from karpy.api import labels
from karpy.kube import client, resources
from karpy.operator import wiring
from karpy.state import informer

log = logging.getLogger(__name__)

PRICE_REFRESH: Final = 300.0
"""Seconds between refreshes of the cost gauges' price book (the provider caches prices for longer)."""
SYNC_POLL: Final = 0.5


class LeadershipLost(Exception):
    """This replica led and lost the Lease: `karpy run` exits so that it restarts as a fresh follower."""


def _deleting_with_finalizer(body: Mapping[str, Any], finalizer: str) -> bool:
    meta = body.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or ())


def claims_for_node(ctrl: wiring.Controller, node: Mapping[str, Any]) -> list[str]:
    """The NodeClaims a Node belongs to (by providerID, else by status.nodeName) from the state cache's index."""
    return [claim.name for claim in ctrl.cluster.nodeclaims_for_node(node)]


def route(ctrl: wiring.Controller, res: resources.Resource, event_type: str, body: Mapping[str, Any]) -> None:
    """Queue the work one watch event of `res` calls for (see the module docstring)."""
    meta = body.get("metadata") or {}
    name = str(meta.get("name") or "")
    alive = event_type != client.DELETED
    if res == resources.NODECLAIMS:
        if alive:
            ctrl.queue(wiring.NODECLAIMS).add(name)
        pool = (meta.get("labels") or {}).get(labels.LABEL_NODEPOOL)
        if pool:
            ctrl.queue(wiring.NODEPOOLS).add(str(pool))
            if wiring.STATIC_NODEPOOLS in ctrl.queues:
                ctrl.queue(wiring.STATIC_NODEPOOLS).add(str(pool))
    elif res == resources.NODES:
        if alive and _deleting_with_finalizer(body, labels.FINALIZER_TERMINATION):
            ctrl.queue(wiring.NODES).add(name)
        for claim in claims_for_node(ctrl, body):
            ctrl.queue(wiring.NODECLAIMS).add(claim)
    elif res == resources.NODEPOOLS:
        if alive:
            ctrl.queue(wiring.NODEPOOLS).add(name)
            if wiring.STATIC_NODEPOOLS in ctrl.queues:
                ctrl.queue(wiring.STATIC_NODEPOOLS).add(name)
    elif res == resources.EC2NODECLASSES and wiring.NODECLASSES in ctrl.queues:
        if alive:
            ctrl.queue(wiring.NODECLASSES).add(name)
        for pool in ctrl.cluster.nodepools():
            if pool.template.node_class_ref.name == name:
                ctrl.queue(wiring.NODEPOOLS).add(pool.name)


ROUTED: Final = (resources.NODECLAIMS, resources.NODES, resources.NODEPOOLS, resources.EC2NODECLASSES)
"""The resources `route` acts on (pods reach the provisioner through `observers`, not through a queue)."""


async def wait_synced(ctrl: wiring.Controller) -> None:
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
        if wiring.STATIC_NODEPOOLS in ctrl.queues:
            ctrl.queue(wiring.STATIC_NODEPOOLS).add(str(pool["metadata"]["name"]))
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
    if ctrl.repair is not None:
        loops["node repair"] = ctrl.repair.run
    if ctrl.cloud.janitor is not None:
        loops["launch template janitor"] = ctrl.cloud.janitor
    if ctrl.cloud.tagger is not None:
        loops["instance tagger"] = ctrl.cloud.tagger
    return loops


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


def start(ctrl: wiring.Controller) -> list[asyncio.Task[None]]:
    """What every replica runs for its whole life: the informers, the elector, the event recorder, and `lead`, which
    waits for the Lease before it starts the leader's loops."""
    return [
        asyncio.create_task(informer.run_informers(ctrl.kube, ctrl.cluster), name="informers"),
        asyncio.create_task(ctrl.elector.run(), name="leader election"),
        asyncio.create_task(ctrl.recorder.run(), name="event recorder"),
        asyncio.create_task(lead(ctrl), name="leader loops"),
    ]


async def cancel(tasks: Sequence[asyncio.Task[Any]]) -> list[Any]:
    """Cancel `tasks` and wait for them; what each ended with (its result, its exception or a CancelledError)."""
    for task in tasks:
        task.cancel()
    return await asyncio.gather(*tasks, return_exceptions=True)


def raise_ending(tasks: Sequence[asyncio.Task[None]], results: Sequence[BaseException | None]) -> None:
    """After `cancel`: raise LeadershipLost when `lead` ended with it, else a RuntimeError naming the first task that
    failed; nothing when every task was only cancelled."""
    for task, result in zip(tasks, results, strict=True):
        if isinstance(result, LeadershipLost):
            raise result
        if isinstance(result, Exception):
            raise RuntimeError(f"{task.get_name()} failed") from result
