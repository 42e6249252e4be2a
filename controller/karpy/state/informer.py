"""List+watch informers feeding a `Cluster`: LIST → apply → mark_listed → WATCH from the list's resourceVersion.

A watch that ends (the server's timeoutSeconds) resumes from the last seen resourceVersion, as client-go's
reflector does; 410 Expired or any error re-LISTs, and the re-list emits DELETED for objects that vanished
meanwhile. Errors back off exponentially on the cluster's clock. Cancellation closes the watch stream.

Hand-written, not Kopf's watch: it is the one watch of each resource, and it syncs 50,000 pods + 5,000 nodes with 6x
less CPU, applies 10x more events per CPU second, and its re-list reports deletions Kopf's forgets
(docs/ARCHITECTURE.md, "Why the informer and work queue, not Kopf handlers").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.kube import client, resources
from karpy.state import cluster as state_cluster
from karpy.state import facts

log = logging.getLogger(__name__)

INFORMED: tuple[resources.Resource, ...] = (
    resources.NODEPOOLS,
    resources.EC2NODECLASSES,
    resources.NODECLAIMS,
    resources.NODES,
    resources.PODS,
    resources.DAEMONSETS,
    resources.PDBS,
    resources.PVCS,
    resources.PVS,
    resources.STORAGECLASSES,
    resources.CSINODES,
    resources.VOLUMEATTACHMENTS,
)
"""What the controller's cluster model watches."""
WATCH_TIMEOUT = 300
"""Seconds the API server keeps one watch open (timeoutSeconds); the informer then resumes."""
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0


async def _relist(
    kube: client.KubeClient,
    cluster: state_cluster.Cluster,
    res: resources.Resource,
    known: dict[str, Mapping[str, Any]],
    *,
    namespace: str,
) -> str:
    items, version = await kube.list(res, namespace=namespace)
    seen: dict[str, Mapping[str, Any]] = {}
    for obj in items:
        key = facts.key(obj)
        cluster.apply(res, client.WatchEvent(client.ADDED, obj))
        seen[key] = _kept(cluster, res, key, obj)
    for key, gone in known.items():
        if key not in seen:
            cluster.apply(res, client.WatchEvent(client.DELETED, gone))
    known.clear()
    known.update(seen)
    cluster.mark_listed(res)
    return version


def _kept(
    cluster: state_cluster.Cluster, res: resources.Resource, key: str, obj: Mapping[str, Any]
) -> Mapping[str, Any]:
    """What to remember of a listed or watched object for the DELETED event a re-list may owe: the cache's own
    (trimmed) copy, so that the informer does not hold a second, whole copy of every object."""
    return cluster.raw(res, key) or obj


async def _watch(
    kube: client.KubeClient,
    cluster: state_cluster.Cluster,
    res: resources.Resource,
    known: dict[str, Mapping[str, Any]],
    *,
    version: str,
    namespace: str,
    timeout_seconds: int,
) -> tuple[str, int]:
    """Apply events until the stream ends: (last resourceVersion seen, events applied); raises Expired on 410."""
    applied = 0
    stream = kube.watch(res, resource_version=version, namespace=namespace, timeout_seconds=timeout_seconds)
    try:
        async for event in stream:
            cluster.apply(res, event)
            key = facts.key(event.object)
            if event.type == client.DELETED:
                known.pop(key, None)
            else:
                known[key] = _kept(cluster, res, key, event.object)
            version = str(facts.metadata(event.object).get("resourceVersion") or version)
            applied += 1
    finally:
        await client.aclose(stream)
    return version, applied


async def run_informer(
    kube: client.KubeClient,
    cluster: state_cluster.Cluster,
    res: resources.Resource,
    *,
    namespace: str = "",
    timeout_seconds: int = WATCH_TIMEOUT,
) -> None:
    """Keep `cluster` in step with `res` until cancelled."""
    cluster.expect(res)
    known: dict[str, Mapping[str, Any]] = {}
    backoff = BACKOFF_START
    while True:
        try:
            version = await _relist(kube, cluster, res, known, namespace=namespace)
            while True:
                version, applied = await _watch(
                    kube, cluster, res, known, version=version, namespace=namespace, timeout_seconds=timeout_seconds
                )
                backoff = BACKOFF_START
                if not applied:  # a server closing every watch at once must not make us spin
                    await cluster.clock.sleep(BACKOFF_START)
        except client.Expired:
            log.info("watch of %s expired; re-listing", res)
            continue
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the API server or the network failed: back off and re-list
            log.warning("informer for %s failed (%s); re-listing in %.0f s", res, error, backoff)
            await cluster.clock.sleep(backoff)
            backoff = min(BACKOFF_MAX, backoff * 2)


async def run_informers(
    kube: client.KubeClient,
    cluster: state_cluster.Cluster,
    informed: Iterable[resources.Resource] = INFORMED,
    *,
    timeout_seconds: int = WATCH_TIMEOUT,
) -> None:
    """One informer per resource until cancelled; `cluster.synced()` turns true once all of them listed."""
    informed = tuple(informed)
    cluster.expect(*informed)  # before any LIST, so that the first informer to finish cannot claim "synced"
    async with asyncio.TaskGroup() as group:
        for res in informed:
            group.create_task(run_informer(kube, cluster, res, timeout_seconds=timeout_seconds), name=f"informer {res}")
