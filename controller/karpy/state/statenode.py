"""`StateNode`: one machine as the controller sees it, a Node and/or its NodeClaim joined (pure).

Before registration only the NodeClaim exists (an in-flight node); an unmanaged node has no NodeClaim. Until a
managed node is initialized its NodeClaim's view wins for labels, taints and resources (the kubelet's early
reports are partial), as upstream `statenode.go` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels, meta
from karpy.api import nodeclaim as api_nodeclaim
from karpy.scheduling import pods as scheduling_pods
from karpy.state import facts


@dataclass(frozen=True, slots=True)
class StateNode:
    name: str  # the Node's name once registered, else the NodeClaim's
    nodeclaim: api_nodeclaim.NodeClaim | None
    node: Mapping[str, Any] | None  # raw Node object (read-only)
    labels: Mapping[str, str]
    taints: tuple[meta.Taint, ...]
    allocatable: Mapping[str, int]
    capacity: Mapping[str, int]
    pods: tuple[scheduling_pods.Pod, ...] = ()
    nodepool: str = ""
    initialized: bool = False
    marked_for_deletion: bool = False
    nominated_until: float = 0.0  # epoch seconds; 0 = never nominated
    deleting: bool = False
    managed: bool = False
    provider_id: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    unreadable_pods: tuple[str, ...] = ()
    """Keys of pods bound to the node that karpy cannot read: the node's pods are not all known."""
    volume_limits: Mapping[str, int] = field(default_factory=dict)
    """CSI driver -> volumes it may attach here, from the node's CSINode (none known before registration)."""
    held: frozenset[str] = frozenset()
    """Keys of the pods of a leaving node that cannot be evicted now (`karpy.state.movable`): they need no new home
    until they can go. Always empty for a node that is not deleting or marked for deletion."""

    @property
    def nodeclaim_name(self) -> str:
        return self.nodeclaim.metadata.name if self.nodeclaim is not None else ""

    @property
    def node_name(self) -> str:
        return str(facts.metadata(self.node).get("name", "")) if self.node is not None else ""

    def nominated(self, now: float) -> bool:
        return self.nominated_until > now


def _condition_true(claim: api_nodeclaim.NodeClaim, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in claim.status.conditions)


def build(
    *,
    claim: api_nodeclaim.NodeClaim | None,
    node: Mapping[str, Any] | None,
    pods: tuple[scheduling_pods.Pod, ...] = (),
    unreadable_pods: tuple[str, ...] = (),
    marked: bool = False,
    nominated_until: float = 0.0,
    volume_limits: Mapping[str, int] | None = None,
) -> StateNode:
    """Join a Node and/or NodeClaim into a StateNode (at least one of them must be given)."""
    if claim is None and node is None:
        raise ValueError("a state node needs a Node or a NodeClaim")
    node_meta = facts.metadata(node) if node is not None else {}
    node_labels: Mapping[str, str] = dict(node_meta.get("labels") or {})
    claim_labels: Mapping[str, str] = dict(claim.metadata.labels) if claim is not None else {}
    nodepool = node_labels.get(labels.LABEL_NODEPOOL) or claim_labels.get(labels.LABEL_NODEPOOL, "")
    managed = bool(nodepool)
    if claim is not None:
        initialized = _condition_true(claim, api_nodeclaim.INITIALIZED) and node is not None
    else:
        initialized = node is not None
    use_claim = claim is not None and (node is None or not initialized)
    if use_claim:
        assert claim is not None
        shown_labels: Mapping[str, str] = {**claim_labels, **node_labels}
        taints = claim.spec.taints
        allocatable = dict(claim.status.allocatable)
        capacity = dict(claim.status.capacity)
    else:
        assert node is not None
        status = node.get("status") or {}
        shown_labels = node_labels
        taints = facts.node_taints(node)
        allocatable = facts.resource_list(status.get("allocatable"))
        capacity = facts.resource_list(status.get("capacity")) or dict(allocatable)
    name = str(node_meta.get("name")) if node is not None else (claim.metadata.name if claim is not None else "")
    deleting = bool(node_meta.get("deletionTimestamp")) or (
        claim is not None and claim.metadata.deletion_timestamp is not None
    )
    provider_id = (claim.status.provider_id if claim is not None else "") or (
        facts.node_provider_id(node) if node is not None else ""
    )
    annotations = dict(node_meta.get("annotations") or {}) if node is not None else {}
    if claim is not None:
        annotations = {**claim.metadata.annotations, **annotations}
    return StateNode(
        name=name,
        nodeclaim=claim,
        node=node,
        labels=shown_labels,
        taints=taints,
        allocatable=allocatable,
        capacity=capacity,
        pods=pods,
        nodepool=nodepool,
        initialized=initialized,
        marked_for_deletion=marked,
        nominated_until=nominated_until,
        deleting=deleting,
        managed=managed,
        provider_id=provider_id,
        annotations=annotations,
        unreadable_pods=unreadable_pods,
        volume_limits=dict(volume_limits or {}),
    )
