"""From a cluster-state snapshot to the scheduler's input (pure; core: provisioner.go `Schedule`/`NewScheduler`).

State nodes are read *before* pending pods so capacity is over- rather than under-estimated. Nodes that are deleting
or marked for deletion are not offered to the scheduler; their reschedulable pods (not DaemonSet pods, which die
with the node, nor pods that cannot be evicted now) are added to the pending ones so replacements are launched
before the node is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from karpy import settings as karpy_settings
from karpy.api import meta, nodepool
from karpy.cloudprovider import types
from karpy.scheduling import catalog, pods, scheduler, volumes
from karpy.state import cluster as state_cluster
from karpy.state import statenode

READY = "Ready"
DEFAULT_OPTIONS: Final = karpy_settings.SchedulingSettings()
"""Upstream's default scheduling policies (Respect, Strict, DRA requests ignored)."""


def existing_nodes(state_nodes: Iterable[statenode.StateNode]) -> list[scheduler.ExistingNode]:
    return [
        scheduler.ExistingNode(
            name=n.name,
            labels=dict(n.labels),
            taints=tuple(n.taints),
            allocatable=dict(n.allocatable),
            pods=tuple(n.pods),
            nodepool=n.nodepool or None,  # "" = not managed by a NodePool
            initialized=n.initialized,
            volume_limits=dict(n.volume_limits),
        )
        for n in state_nodes
        if not (n.deleting or n.marked_for_deletion)
    ]


def reschedulable_pods(state_nodes: Iterable[statenode.StateNode]) -> list[pods.Pod]:
    """Pods of nodes on their way out that need a new home now; unbound copies, so the scheduler treats them as
    pending. As upstream's IsCurrentlyReschedulable (pkg/utils/pdb/pdb.go): not a DaemonSet's or a mirror (Node-owned)
    pod, not terminating unless a StatefulSet owns it (its replacement waits for it to go), and not held where it is
    by do-not-disrupt or a PDB that never allows its eviction (`held`, `karpy.state.movable`): capacity for a pod
    that cannot leave would stand empty until it does."""
    return [
        dataclasses.replace(p, node_name="", terminating=False)
        for n in state_nodes
        if n.deleting or n.marked_for_deletion
        for p in n.pods
        if not p.is_daemon
        and p.owner_kind != "Node"
        and (not p.terminating or p.owner_kind == "StatefulSet")
        and p.key not in n.held
    ]


def merge_pods(*groups: Iterable[pods.Pod]) -> list[pods.Pod]:
    """Union by namespace/name, first occurrence wins."""
    seen: dict[str, pods.Pod] = {}
    for group in groups:
        for p in group:
            seen.setdefault(p.key, p)
    return list(seen.values())


def schedulable_pools(pools: Iterable[nodepool.NodePool]) -> tuple[list[nodepool.NodePool], dict[str, str]]:
    """Pools the scheduler may use, and why the others are left out.

    Upstream uses only Ready pools; karpy leaves out a pool only when its Ready condition is explicitly False
    (a pool nobody has set conditions on yet is usable), plus deleting pools and static (replicas) pools.
    """
    usable: list[nodepool.NodePool] = []
    skipped: dict[str, str] = {}
    for pool in pools:
        ready = meta.condition(pool.status.conditions, READY)
        if pool.metadata.deletion_timestamp is not None:
            skipped[pool.name] = "deleting"
        elif pool.replicas is not None:
            skipped[pool.name] = "static capacity (replicas) is not provisioned by the scheduler"
        elif ready is not None and ready.status == "False":
            skipped[pool.name] = f"not ready: {ready.message or ready.reason}"
        else:
            usable.append(pool)
    return usable, skipped


def pending_pods(cluster: state_cluster.Cluster, state_nodes: Iterable[statenode.StateNode]) -> list[pods.Pod]:
    """What a provisioning pass schedules: the provisionable pods and the pods of nodes on their way out (read the
    state nodes first, so that capacity is over- rather than under-estimated)."""
    return merge_pods(cluster.pending_pods(), reschedulable_pods(state_nodes))


def provisioning_input(
    cluster: state_cluster.Cluster,
    state_nodes: Sequence[statenode.StateNode],
    pending: Sequence[pods.Pod],
    *,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    options: karpy_settings.SchedulingSettings = DEFAULT_OPTIONS,
    diagnose: bool = False,
    pools: Sequence[nodepool.NodePool] | None = None,
) -> scheduler.SchedulingInput:
    """The provisioner's scheduling input: `pending` against the schedulable pools that have instance types, the
    nodes not leaving, the DaemonSets' overhead and the cluster's volumes (`diagnose`: see SchedulingInput).

    `pools` replaces the cluster's NodePools (`karpy plan` solves on the proposed ones); None takes the cluster's."""
    candidates = cluster.nodepools() if pools is None else pools
    return scheduling_input(
        pending,
        [p for p in schedulable_pools(candidates)[0] if p.name in instance_types],
        instance_types=instance_types,
        existing=existing_nodes(state_nodes),
        daemonsets=cluster.daemonsets(),
        volume_catalog=cluster.volumes(),
        options=options,
        diagnose=diagnose,
    )


def scheduling_input(
    pending: Sequence[pods.Pod],
    pools: Sequence[nodepool.NodePool],
    *,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    existing: Sequence[scheduler.ExistingNode],
    daemonsets: Sequence[pods.Pod],
    volume_catalog: volumes.VolumeCatalog,
    options: karpy_settings.SchedulingSettings = DEFAULT_OPTIONS,
    diagnose: bool = False,
    catalogs: catalog.Catalogs | None = None,
    decisive: frozenset[str] = frozenset(),
    one_claim_at_most: bool = False,
) -> scheduler.SchedulingInput:
    return scheduler.SchedulingInput(
        pods=pending,
        nodepools=pools,
        instance_types=instance_types,
        existing_nodes=existing,
        daemonsets=daemonsets,
        volumes=volume_catalog,
        options=options,
        compute_lower_bound=False,  # the provisioner acts on the plan; the bound is for reports and benchmarks
        diagnose=diagnose,
        catalogs=catalogs,
        decisive=decisive,
        one_claim_at_most=one_claim_at_most,
    )
