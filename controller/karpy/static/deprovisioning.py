"""Scale a static pool down (core: pkg/controllers/static/deprovisioning/controller.go): while active > replicas,
delete the excess: claims not launched yet first, then empty nodes (only DaemonSet pods, none with an active
do-not-disrupt), then the rest by cost (nodes without a do-not-disrupt pod first, then lowest rescheduling cost ×
lifetime remaining, with disruption's costs). Static pools are never consolidated.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from karpy import clock as karpy_clock
from karpy.api import nodepool
from karpy.disruption import candidates
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.state import cluster as state_cluster
from karpy.state import nodepoolstate, statenode

log = logging.getLogger(__name__)


def scale_down_order(
    nodes: Sequence[statenode.StateNode], infos: Mapping[str, candidates.PodInfo], *, now: float
) -> list[statenode.StateNode]:
    """Active nodes in the order scale-down takes them: unlaunched claims, empty nodes, then by cost."""
    active = [n for n in nodes if not nodepoolstate.deleting(n) and not nodepoolstate.pending(n)]

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


async def scale_down(
    pool: nodepool.NodePool,
    nodes: Sequence[statenode.StateNode],
    excess: int,
    *,
    client: kube_client.KubeClient,
    cluster: state_cluster.Cluster,
    clock: karpy_clock.Clock,
    dry_run: bool,
) -> None:
    now = clock.now()
    infos = {}
    for n in nodes:
        for p in n.pods:
            raw = cluster.raw(resources.PODS, p.key)
            if raw is not None:
                infos[p.key] = candidates.pod_info(raw, now=now)
    chosen = scale_down_order(nodes, infos, now=now)[:excess]
    log.info(
        "deprovisioning nodeclaims to satisfy replica count",
        extra={"nodepool": pool.name, "desired": pool.replicas, "deprovision-count": len(chosen)},
    )
    for n in chosen:
        await client.delete(resources.NODECLAIMS, n.nodeclaim_name)
        log.info("deleting nodeclaim", extra={"nodepool": pool.name, "nodeclaim": n.nodeclaim_name})
        if not dry_run:
            # Counted as deleting at once: the next reconcile must not take another node before the watch
            # reports this one's deletionTimestamp (upstream MarkNodeClaimDeleting).
            cluster.mark_for_deletion(*(name for name in (n.nodeclaim_name, n.node_name) if name))
