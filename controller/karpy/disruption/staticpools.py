"""Static NodePools (`spec.replicas`, feature gate StaticCapacity): keep each pool at its replica count (core:
pkg/controllers/static/provisioning/controller.go and static/deprovisioning/controller.go).

A static pool's NodeClaims are counted as upstream's NodePoolState does (core: controllers/state/statenodepool.go):
*deleting* (a deletionTimestamp, or marked for deletion by a disruption command), *pending disruption* (a
DisruptionReason condition: the disruption queue is replacing it) or *active*.

* Scale up: while active + pending < replicas, create the difference, no more than the pool's `limits.nodes` leaves
  beside active + deleting + pending. The claims carry the pool's requirements only: the cloud provider picks the
  instance at launch, no pod is scheduled for them.
* Scale down: while active > replicas, delete the excess: claims not launched yet first, then empty nodes (only
  DaemonSet pods, none with an active do-not-disrupt), then the rest by cost (nodes without a do-not-disrupt pod
  first, then lowest rescheduling cost × lifetime remaining).

Static pools are never consolidated and never get pods' NodeClaims from the scheduler; drift replaces their nodes
one for one (`methods.StaticDrift`). Lives in `disruption` because scale-down ranks nodes with its costs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Final

from karpy import clock as karpy_clock
from karpy.api import labels, meta, nodeclaim, nodepool
from karpy.disruption import candidates
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.scheduling import catalog, results
from karpy.state import cluster as state_cluster
from karpy.state import statenode

log = logging.getLogger(__name__)

REQUEUE: Final = 60.0
"""Seconds between checks of a static pool with nothing to do (upstream requeues after a minute)."""
SYNC_RETRY: Final = 1.0
"""Seconds before trying again while the state cache is not synced (upstream: one second)."""
NODE: Final = 1000
"""One node in the `nodes` limit (limits are milli-units)."""
READY: Final = "Ready"


@dataclasses.dataclass(frozen=True, slots=True)
class Counts:
    active: int = 0
    deleting: int = 0
    pending: int = 0
    """Pending disruption: being replaced by the disruption queue."""


def pool_nodes(nodes: Iterable[statenode.StateNode], pool: str) -> list[statenode.StateNode]:
    """The state nodes of `pool` that have a NodeClaim (a static pool's capacity is its NodeClaims)."""
    return [n for n in nodes if n.nodeclaim is not None and n.nodepool == pool]


def _deleting(node: statenode.StateNode) -> bool:
    return node.deleting or node.marked_for_deletion


def _pending(node: statenode.StateNode) -> bool:
    return node.nodeclaim is not None and node.nodeclaim.is_true(nodeclaim.DISRUPTION_REASON)


def counts(nodes: Iterable[statenode.StateNode]) -> Counts:
    """How many of a pool's nodes are active, deleting and pending disruption."""
    active = deleting = pending = 0
    for n in nodes:
        if _deleting(n):
            deleting += 1
        elif _pending(n):
            pending += 1
        else:
            active += 1
    return Counts(active, deleting, pending)


def node_limit(pool: nodepool.NodePool) -> int | None:
    """The pool's `limits.nodes` as a count, None when unlimited."""
    limit = pool.limits.get(labels.RESOURCE_NODES)
    return None if limit is None else limit // NODE


def headroom(pool: nodepool.NodePool, found: Counts) -> int | None:
    """How many more NodeClaims `limits.nodes` allows now (None: unlimited). Every counted claim holds a node."""
    limit = node_limit(pool)
    return None if limit is None else max(0, limit - found.active - found.deleting - found.pending)


def to_create(pool: nodepool.NodePool, found: Counts) -> int:
    """NodeClaims to create now: the replicas missing, within the node limit."""
    missing = (pool.replicas or 0) - found.active - found.pending
    room = headroom(pool, found)
    return max(0, missing if room is None else min(missing, room))


def static_plan(pool: nodepool.NodePool) -> results.PlannedNodeClaim:
    """One NodeClaim of a static pool: the pool's requirements and labels, no pods, no instance-type options."""
    return results.PlannedNodeClaim(
        nodepool=pool.name,
        requirements=catalog.pool_requirements(pool),
        instance_type_options=(),
        pods=(),
        requests={},
        cheapest=None,
        static=True,
    )


def ready(pool: nodepool.NodePool) -> bool:
    """Usable for launches: Ready not explicitly False (as `provisioning.snapshot.schedulable_pools` decides)."""
    found = meta.condition(pool.status.conditions, READY)
    return found is None or found.status != "False"


def scale_down_order(
    nodes: Sequence[statenode.StateNode], infos: Mapping[str, candidates.PodInfo], *, now: float
) -> list[statenode.StateNode]:
    """Active nodes in the order scale-down takes them: unlaunched claims, empty nodes, then by cost."""
    active = [n for n in nodes if not _deleting(n) and not _pending(n)]

    def pods_of(n: statenode.StateNode) -> list[candidates.PodInfo]:
        unread = candidates.PodInfo  # a pod the cache cannot read counts as an ordinary, movable one
        return [infos.get(p.key) or unread(p.key, p.namespace, p.labels, False, 0, 0.0, True) for p in n.pods]

    def key(n: statenode.StateNode) -> tuple[int, bool, float, str]:
        assert n.nodeclaim is not None
        if not n.nodeclaim.status.provider_id:
            return (0, False, 0.0, n.name)
        pods = pods_of(n)
        blocked = any(p.do_not_disrupt for p in pods)
        if not blocked and not any(p.reschedulable for p in pods):
            return (1, False, 0.0, n.name)
        cost = candidates.disruption_cost(pods, candidates.lifetime_remaining(n.nodeclaim, now))
        return (2, blocked, cost, n.name)

    return sorted(active, key=key)


Create = Callable[[Sequence[results.PlannedNodeClaim], Mapping[str, nodepool.NodePool]], Awaitable[object]]
"""Create NodeClaims for plans (the provisioner's `create_nodeclaims`: limits, metrics, the in-flight record)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The static-pool reconciler's collaborators: it launches through the provisioner's `create`, records nothing."""

    client: kube_client.KubeClient
    cluster: state_cluster.Cluster
    clock: karpy_clock.Clock
    create: Create
    dry_run: bool = False
    """Deletions go through a dry-run client and only log; the state cache is then not marked either."""


class StaticPoolController:
    """Reconcile one static NodePool by name (the operator's work queue calls it on pool and claim events)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def reconcile(self, name: str) -> float | None:
        """Scale the pool towards its replicas; seconds until the next check (None: not a static pool)."""
        deps = self._deps
        pool = deps.cluster.nodepool(name)
        if pool is None or pool.replicas is None or pool.metadata.deletion_timestamp is not None:
            return None
        if not deps.cluster.synced():
            # Counting against a partial cache would launch nodes the pool already has.
            return SYNC_RETRY
        nodes = pool_nodes(deps.cluster.state_nodes(), name)
        found = counts(nodes)
        if found.active > pool.replicas:
            await self._scale_down(pool, nodes, found.active - pool.replicas)
        elif ready(pool):
            await self._scale_up(pool, found)
        return REQUEUE

    async def _scale_up(self, pool: nodepool.NodePool, found: Counts) -> None:
        wanted = (pool.replicas or 0) - found.active - found.pending
        count = to_create(pool, found)
        if wanted > 0 and count == 0:
            log.info("nodepool node limit reached", extra={"nodepool": pool.name, "limit": node_limit(pool)})
        if count <= 0:
            return
        log.info(
            "provisioning nodeclaims to satisfy replica count",
            extra={"nodepool": pool.name, "current": found.active, "desired": pool.replicas, "provision-count": count},
        )
        await self._deps.create([static_plan(pool) for _ in range(count)], {pool.name: pool})

    async def _scale_down(self, pool: nodepool.NodePool, nodes: Sequence[statenode.StateNode], excess: int) -> None:
        deps = self._deps
        now = deps.clock.now()
        infos = {}
        for n in nodes:
            for p in n.pods:
                raw = deps.cluster.raw(resources.PODS, p.key)
                if raw is not None:
                    infos[p.key] = candidates.pod_info(raw, now=now)
        chosen = scale_down_order(nodes, infos, now=now)[:excess]
        log.info(
            "deprovisioning nodeclaims to satisfy replica count",
            extra={"nodepool": pool.name, "desired": pool.replicas, "deprovision-count": len(chosen)},
        )
        for n in chosen:
            await deps.client.delete(resources.NODECLAIMS, n.nodeclaim_name)
            log.info("deleting nodeclaim", extra={"nodepool": pool.name, "nodeclaim": n.nodeclaim_name})
            if not deps.dry_run:
                # Counted as deleting at once: the next reconcile must not take another node before the watch
                # reports this one's deletionTimestamp (upstream MarkNodeClaimDeleting).
                deps.cluster.mark_for_deletion(*(name for name in (n.nodeclaim_name, n.node_name) if name))
