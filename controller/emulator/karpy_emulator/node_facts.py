"""Nodes as the kube-scheduler stand-in's filters see them, and its cache of nodes with their bound pods.

A node's facts are its labels, its NoSchedule/NoExecute taints and its allocatable. Nodes being deleted are left out.
NotReady and cordoned nodes carry the NoSchedule taints the node lifecycle controller gives them
(`node.kubernetes.io/not-ready`, `node.kubernetes.io/unschedulable`): no pod without a toleration lands there, yet
they still count as topology-spread domains (nodeTaintsPolicy defaults to Ignore), so a zonal spread does not pile
into the zones whose nodes happened to be Ready first. PreferNoSchedule taints are soft (ignored here).

`NodeCache` is kube-scheduler's cache (pkg/scheduler/backend/cache): each bound pod's node, the pods on each node,
and each node as the solver sees it (`scheduler.ExistingNode`, derived once for every solve by `scheduler.derive`).
A node's facts are read once per version of the node object; its `ExistingNode` is made again only when the node or
one of its pods changed, so a pass costs what changed, not the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import labels, meta, quantity
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import scheduler
from karpy_emulator import informers, scheduling_queue, volumes

NOT_READY_TAINT = meta.Taint(key="node.kubernetes.io/not-ready", effect=labels.EFFECT_NO_SCHEDULE, value="")
UNSCHEDULABLE_TAINT = meta.Taint(key="node.kubernetes.io/unschedulable", effect=labels.EFFECT_NO_SCHEDULE, value="")


def is_deleting(node: Mapping[str, Any]) -> bool:
    return bool((node.get("metadata") or {}).get("deletionTimestamp"))


def lifecycle_taints(node: Mapping[str, Any]) -> tuple[meta.Taint, ...]:
    """The NoSchedule taints the node lifecycle controller keeps on a NotReady or a cordoned node."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    out = [] if ready else [NOT_READY_TAINT]
    if (node.get("spec") or {}).get("unschedulable"):
        out.append(UNSCHEDULABLE_TAINT)
    return tuple(out)


def hard_taints(node: Mapping[str, Any]) -> tuple[meta.Taint, ...]:
    """NoSchedule and NoExecute taints (PreferNoSchedule only scores nodes in kube-scheduler), with the lifecycle
    taints of a NotReady or cordoned node added when the node object does not carry them yet."""
    out = []
    for raw in (node.get("spec") or {}).get("taints") or ():
        effect = str(raw.get("effect") or "")
        if effect != labels.EFFECT_PREFER_NO_SCHEDULE:
            out.append(meta.Taint(key=str(raw.get("key") or ""), effect=effect, value=str(raw.get("value") or "")))
    out.extend(t for t in lifecycle_taints(node) if not any((o.key, o.effect) == (t.key, t.effect) for o in out))
    return tuple(out)


def allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    raw = (node.get("status") or {}).get("allocatable") or {}
    return {str(name): quantity.parse(str(value)) for name, value in raw.items()}


def facts(node: Mapping[str, Any]) -> scheduling_queue.NodeFacts:
    """What the filters and the queue's node hints read of a node."""
    return scheduling_queue.NodeFacts(
        labels=dict((node.get("metadata") or {}).get("labels") or {}),
        taints=hard_taints(node),
        allocatable=allocatable(node),
    )


def existing_node(node: Mapping[str, Any], pods: Sequence[scheduling_pods.Pod]) -> scheduler.ExistingNode:
    """The node as the solver sees it, with the pods bound to it."""
    return existing_from(str(node["metadata"]["name"]), facts(node), pods)


def existing_from(
    name: str, known: scheduling_queue.NodeFacts, pods: Sequence[scheduling_pods.Pod]
) -> scheduler.ExistingNode:
    return scheduler.ExistingNode(
        name=name,
        labels=volumes.node_labels(known.labels),
        taints=known.taints,
        allocatable=known.allocatable,
        pods=tuple(pods),
    )


class NodeCache:
    """The bound pods per node and each node's facts and `ExistingNode` (see the module docstring)."""

    def __init__(self) -> None:
        self._node_of: dict[informers.Key, str] = {}
        self._on_node: dict[str, dict[informers.Key, scheduling_pods.Pod]] = {}
        self._facts: dict[str, scheduling_queue.NodeFacts] = {}
        self._existing: dict[str, scheduler.ExistingNode] = {}

    def node_of(self, key: informers.Key) -> str | None:
        return self._node_of.get(key)

    def node_changed(self, delta: informers.Delta) -> scheduling_queue.NodeChange:
        """Forget what the node's last version said; the change as the queue's hints read it (a node being deleted
        is a node gone)."""
        name = delta.key[1]
        old = self._facts.pop(name, None)
        self._existing.pop(name, None)
        if old is None and delta.old is not None and not is_deleting(delta.old):
            old = facts(delta.old)
        new = None
        if delta.new is not None and not is_deleting(delta.new):
            new = self._facts[name] = facts(delta.new)
        return scheduling_queue.NodeChange(old=old, new=new)

    def place(self, key: informers.Key, node: str, pod: scheduling_pods.Pod) -> None:
        """The pod is bound to `node` and running there (its parse as of now)."""
        self._node_of[key] = node
        self._on_node.setdefault(node, {})[key] = pod
        self._existing.pop(node, None)

    def remove(self, key: informers.Key) -> str | None:
        """The pod left its node (or was on none); the node it was on."""
        was = self._node_of.pop(key, None)
        if was is not None:
            here = self._on_node[was]
            del here[key]
            if not here:
                del self._on_node[was]
            self._existing.pop(was, None)
        return was

    def existing(self, raw: Mapping[str, Any]) -> scheduler.ExistingNode:
        """The node with its bound pods (in a LIST's order), derived for the solver; kept until either changes."""
        name = str(raw["metadata"]["name"])
        found = self._existing.get(name)
        if found is None:
            known = self._facts.get(name)
            if known is None:
                known = self._facts[name] = facts(raw)
            here = self._on_node.get(name, {})
            found = self._existing[name] = scheduler.derive(existing_from(name, known, [here[k] for k in sorted(here)]))
        return found
