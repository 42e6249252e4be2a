"""What the Node finalizer tells while it drains and releases a Node: the Events about the Node and its pods (core:
pkg/controllers/node/termination/terminator/events/events.go) and the termination metrics (core:
node/termination/metrics.go). One `Observer` per finalizer: the controller names what happened, the observer says
it as Events and series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy import events
from karpy.api import decoding, labels
from karpy.kube import client as kube_client
from karpy.termination import drain


class Metrics:
    """What the finalizer counts, by name (core: node/termination/metrics.go). The operator's subclass binds each to
    its Prometheus series (`karpy.runtime.metrics.lifecycle`); this one counts nothing."""

    def node_terminated(self, nodepool: str, zone: str) -> None:
        """A Node's finalizer released: its NodePool ("" if unmanaged) and zone (nodes_terminated)."""

    def node_released(self, nodepool: str, since_deletion: float | None, lifetime: float | None) -> None:
        """Seconds since the deletion request and since creation (None when unknown) when the finalizer is released
        (core: node/termination/controller.go: nodes_termination_duration_seconds, nodes_lifetime_...)."""

    def node_drained(self, nodepool: str) -> None:
        """The NodeClaim's Drained condition first turned True (karpenter_nodes_drained_total)."""

    def eviction_requested(self, code: str) -> None:
        """The HTTP status code of the Eviction API's answer, for every eviction request
        (pods_eviction_requests_total)."""

    def pod_drained(self, reason: str) -> None:
        """A pod evicted or deleted, under the NodeClaim's disruption reason or "Forceful Termination" (core:
        node/termination/terminator/eviction.go `evictionReason`, karpenter_pods_drained_total)."""


EVICTION_CODES: Final = {
    kube_client.EvictionOutcome.EVICTED: "200",
    kube_client.EvictionOutcome.BLOCKED: "429",
    kube_client.EvictionOutcome.NOT_FOUND: "404",
    kube_client.EvictionOutcome.FAILED: "500",
}
"""The code label of an eviction's outcome (FAILED is the 500 a pod matching several budgets gets, the usual one)."""


class Observer:
    """The finalizer's voice: each method is one thing that happened, told as upstream tells it. Each Event is
    deduplicated per object for the recorder's default 2 minutes, as upstream's carry the Node's or pod's name as
    their dedupe value (terminator/events/events.go)."""

    def __init__(self, recorder: events.Recorder, metrics: Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def failed_draining(self, node: Mapping[str, Any], waiting: int) -> None:
        """Pods still wait to be evicted from `node` (FailedDraining)."""
        message = f"Failed to drain node, {waiting} pods are waiting to be evicted"
        self._recorder.record(node, "Warning", "FailedDraining", message, dedupe=events.about(node))

    def drained(self, nodepool: str) -> None:
        """The node's NodeClaim turned Drained=True, once."""
        self._metrics.node_drained(nodepool)

    def awaiting_volumes(self, node: Mapping[str, Any], attachments: Sequence[str]) -> None:
        """VolumeAttachments still hold the node's termination."""
        message = f"Awaiting deletion of bound volumeattachments ({', '.join(attachments)})"
        self._recorder.record(node, "Normal", "AwaitingVolumeDetachment", message, dedupe=events.about(node))

    def deleted(self, pod: drain.DrainPod, grace: int, *, reason: str) -> None:
        """A pod deleted because the node's terminationTime is near; `reason` is the drain's (`pods_drained`)."""
        self._metrics.pod_drained(reason)
        message = f"Deleting the pod to accommodate the terminationTime of its node, grace period {grace}s"
        ref = _pod_ref(pod)
        self._recorder.record(ref, "Normal", "Disrupted", message, dedupe=events.about(ref))

    def eviction(self, pod: drain.DrainPod, outcome: kube_client.EvictionOutcome, *, reason: str) -> None:
        """The Eviction API answered for `pod`: counted by code; an eviction is told, as is a failure other than a
        PodDisruptionBudget's 429 (which only backs off)."""
        self._metrics.eviction_requested(EVICTION_CODES[outcome])
        if outcome is kube_client.EvictionOutcome.EVICTED:
            self._metrics.pod_drained(reason)
            ref = _pod_ref(pod)
            self._recorder.record(ref, "Normal", "Evicted", f"Evicted pod: {reason}", dedupe=events.about(ref))
        elif outcome is kube_client.EvictionOutcome.FAILED:
            message = "Eviction failed (the pod may match several PDBs)"
            self._recorder.record(_pod_ref(pod), "Warning", "FailedEviction", message)

    def released(self, node: Mapping[str, Any], now: float) -> None:
        """The finalizer let `node` go: counted under its NodePool and zone, with its termination time and lifetime."""
        md = node.get("metadata") or {}
        node_labels = md.get("labels") or {}
        pool = str(node_labels.get(labels.LABEL_NODEPOOL) or "")
        self._metrics.node_terminated(pool, str(node_labels.get(labels.LABEL_ZONE) or ""))
        deleted = decoding.timestamp_or_none(md.get("deletionTimestamp"))
        created = decoding.timestamp_or_none(md.get("creationTimestamp"))
        self._metrics.node_released(
            pool, None if deleted is None else now - deleted, None if created is None else now - created
        )


def _pod_ref(pod: drain.DrainPod) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
    }
