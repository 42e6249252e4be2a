"""Where the kube-scheduler stand-in places pending pods, and why the others fit nowhere (kube-scheduler's FitError).

Placement reuses `karpy.scheduling.scheduler.solve` with the cluster's nodes as existing nodes and no NodePools, so
taints/tolerations, node selectors and affinity, topology spread, pod (anti-)affinity, host ports and resources are
judged by the same code the controller simulates with; so are volumes (module `sim.volumes`: PV node affinity,
WaitForFirstConsumer classes' allowed topologies).

A pod that fits nowhere is explained as kube-scheduler's FitError words it (pkg/scheduler/schedule_one.go):
`0/N nodes are available: <count> <reason>, ...`, each node charged with its first failing filter. Interchangeable
pods (equal signatures, as a ReplicaSet's pods are) with the same solver verdict fail alike on the same nodes, so a
pass explains each such group once, not each pod: explaining charges the pod to every node.
"""

from __future__ import annotations

import collections
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import resources as scheduling_resources
from karpy.scheduling import scheduler
from karpy.scheduling import volumes as scheduling_volumes
from karpy_emulator import node_facts, scheduling_queue, volumes


def plan(
    pending: Sequence[scheduling_pods.Pod],
    nodes: Iterable[Mapping[str, Any]],
    bound: Mapping[str, Sequence[scheduling_pods.Pod]],
    *,
    volume_catalog: scheduling_volumes.VolumeCatalog | None = None,
    explain_keys: Container[str] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(pod key -> node name, pod key -> why it fits nowhere) for pending pods on the given nodes; the
    reasons only for `explain_keys` when given (explaining charges every pod to every node)."""
    existing = [node_facts.existing_node(n, bound.get(str(n["metadata"]["name"]), ())) for n in nodes]
    return plan_on(pending, existing, volume_catalog=volume_catalog, explain_keys=explain_keys)


def plan_on(
    pending: Sequence[scheduling_pods.Pod],
    existing: Sequence[scheduler.ExistingNode],
    *,
    volume_catalog: scheduling_volumes.VolumeCatalog | None = None,
    explain_keys: Container[str] | None = None,
    rejected: dict[str, frozenset[scheduling_queue.Plugin]] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """`plan` over nodes already made `ExistingNode`s (derived once for many passes, `scheduler.derive`); `rejected`,
    when given, gets each unschedulable pod's rejecting filters (what the scheduling queue's hints read)."""
    catalog = volume_catalog or scheduling_volumes.VolumeCatalog()
    if not pending:
        return {}, {}
    result = scheduler.solve(
        scheduler.SchedulingInput(
            pods=pending, nodepools=(), instance_types={}, existing_nodes=existing, volumes=catalog
        ),
    )
    placements = {p.key: node for node, placed in result.existing_nodes.items() for p in placed}
    explained: dict[tuple[Any, str], tuple[str, frozenset[scheduling_queue.Plugin]]] = {}
    reasons: dict[str, str] = {}
    for p in pending:
        if p.key in placements or (explain_keys is not None and p.key not in explain_keys):
            continue
        solver_reason = result.unschedulable.get(p.key, "")
        same = (p.signature(), solver_reason)
        if same not in explained:
            explained[same] = _explain(p, existing, solver_reason=solver_reason, catalog=catalog)
        reasons[p.key], plugins = explained[same]
        if rejected is not None:
            rejected[p.key] = plugins
    return placements, reasons


def explain(
    pod: scheduling_pods.Pod,
    nodes: Sequence[scheduler.ExistingNode],
    *,
    solver_reason: str = "",
    volume_catalog: scheduling_volumes.VolumeCatalog | None = None,
) -> str:
    """kube-scheduler's FailedScheduling summary: `0/N nodes are available: <count> <reason>, ...`.

    Each node is charged with its first failing filter (taints, then node selector/affinity, then resources, then
    volumes); nodes that pass all of them failed on something subtler (spread, pod affinity, ports), which the solver
    names. A volume that cannot be resolved at all (PreFilter: missing claim, unbound Immediate claim) is the reason
    for every node, as kube-scheduler reports it.
    """
    return _explain(
        pod, nodes, solver_reason=solver_reason, catalog=volume_catalog or scheduling_volumes.VolumeCatalog()
    )[0]


def _explain(
    pod: scheduling_pods.Pod,
    nodes: Sequence[scheduler.ExistingNode],
    *,
    solver_reason: str,
    catalog: scheduling_volumes.VolumeCatalog,
) -> tuple[str, frozenset[scheduling_queue.Plugin]]:
    """`explain`'s summary and the filters that rejected the pod on some node (none: there was no node)."""
    if not nodes:
        return "0/0 nodes are available: no nodes are ready and schedulable", frozenset()
    unresolved = scheduling_volumes.alternatives(pod, catalog) if pod.pvc_names else ()
    if isinstance(unresolved, str):
        return f"0/{len(nodes)} nodes are available: {unresolved}.", frozenset({scheduling_queue.Plugin.OTHER})
    counts: collections.Counter[str] = collections.Counter()
    plugins: set[scheduling_queue.Plugin] = set()
    for n in nodes:
        plugin, why = _first_failure(pod, n, catalog) or (scheduling_queue.Plugin.OTHER, "")
        plugins.add(plugin)
        counts[why or solver_reason or "node(s) did not fit"] += 1
    summary = ", ".join(f"{count} {why}" for why, count in sorted(counts.items()))
    return f"0/{len(nodes)} nodes are available: {summary}.", frozenset(plugins)


def _first_failure(
    pod: scheduling_pods.Pod, n: scheduler.ExistingNode, catalog: scheduling_volumes.VolumeCatalog
) -> tuple[scheduling_queue.Plugin, str] | None:
    """The node's first failing filter and its message; None when it passes them all."""
    missing = [t for t in n.taints if not any(tol.tolerates(t) for tol in pod.tolerations)]
    if missing:
        t = missing[0]
        value = f": {t.value}" if t.value else ""
        return scheduling_queue.Plugin.TAINT_TOLERATION, f"node(s) had untolerated taint {{{t.key}{value}}}"
    node_labels = {labels.LABEL_HOSTNAME: n.name, **n.labels}
    terms = range(max(1, len(pod.required_node_terms)))
    if not any(pod.node_requirements(term=i).admits(node_labels) for i in terms):
        return scheduling_queue.Plugin.NODE_AFFINITY, "node(s) didn't match Pod's node affinity/selector"
    # A derived node (the stand-in's cache) has its pods' requests summed once, not once per pod group explained.
    used = n.derived.requests if n.derived is not None else scheduling_resources.add(*(p.requests for p in n.pods))
    short = scheduling_resources.exceeded(pod.requests, scheduling_resources.subtract(n.allocatable, used))
    if short:
        return scheduling_queue.Plugin.NODE_RESOURCES_FIT, ", ".join(f"Insufficient {name}" for name in sorted(short))
    conflict = volumes.node_conflict(pod, node_labels, catalog) if pod.pvc_names else ""
    return (scheduling_queue.Plugin.OTHER, conflict) if conflict else None
