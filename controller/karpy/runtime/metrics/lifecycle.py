"""NodeClaim and node lifecycle series: created, disrupted, drifted, repaired, drained and terminated (core:
pkg/metrics/metrics.go, nodeclaim/*/metrics.go, node/termination/metrics.go), and the hooks their reconcilers call.
"""

from __future__ import annotations

from typing import Any, Final

import prometheus_client
from prometheus_client import registry as prometheus_client_registry

from karpy.api import nodeclaim
from karpy.nodeclaim import conditions_controller, expiration, lifecycle_observer, repair
from karpy.runtime.metrics import naming
from karpy.termination import observer as termination_observer

DISRUPTED_LABELS: Final = ("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode")
"""Labels of karpenter_nodeclaims_disrupted_total and karpenter_pods_disruption_initiated_total (core:
pkg/metrics/metrics.go)."""

PROVISIONING_REASON: Final = "provisioning"
"""reason of `karpenter_nodeclaims_created_total` for claims the provisioner creates for pending pods."""


class LifecycleSeries:
    """The NodeClaim and node lifecycle counters and histograms, and the hooks that feed them."""

    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        r, ns = registry, naming.NAMESPACE
        self.nodeclaims_created = prometheus_client.Counter(
            f"{ns}_nodeclaims_created",
            "NodeClaims created, by reason, NodePool and whether minValues was relaxed for them",
            ["reason", "nodepool", "min_values_relaxed"],
            registry=r,
        )
        self.nodeclaims_create_failed = prometheus_client.Counter(
            "karpy_nodeclaims_create_failed",
            "NodeClaims the provisioner could not create: refused by NodePool limits or by the API server",
            ["nodepool", "reason"],
            registry=r,
        )
        self.nodeclaims_terminated = prometheus_client.Counter(
            f"{ns}_nodeclaims_terminated",
            "NodeClaims terminated (finalizer released after the instance was terminated)",
            ["nodepool", "capacity_type", "zone"],
            registry=r,
        )
        self.nodeclaims_disrupted = prometheus_client.Counter(
            f"{ns}_nodeclaims_disrupted",
            "NodeClaims deleted by a disruption (expiration, interruption, launch failure, timeout, ...)",
            DISRUPTED_LABELS,
            registry=r,
        )
        self.pods_disruption_initiated = prometheus_client.Counter(
            f"{ns}_pods_disruption_initiated",
            "Pod disruptions initiated: the reschedulable pods of each NodeClaim disrupted",
            DISRUPTED_LABELS,
            registry=r,
        )
        self.nodeclaims_drifted = prometheus_client.Counter(
            "karpy_nodeclaims_drifted", "NodeClaims found drifted", ["type", "nodepool"], registry=r
        )
        self.nodeclaims_unhealthy_disrupted = prometheus_client.Counter(
            f"{ns}_nodeclaims_unhealthy_disrupted",
            "Unhealthy NodeClaims disrupted by node repair, by the node condition that was unhealthy",
            ["condition", "nodepool", "capacity_type", "image_id"],
            registry=r,
        )
        self.nodes_created = prometheus_client.Counter(
            f"{ns}_nodes_created", "Nodes registered for a NodeClaim", ["nodepool", "zone"], registry=r
        )
        self.nodes_drained = prometheus_client.Counter(
            f"{ns}_nodes_drained", "Nodes drained by karpy", ["nodepool"], registry=r
        )
        self.nodes_termination_duration = prometheus_client.Summary(
            f"{ns}_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            ["nodepool"],
            registry=r,
        )
        self.nodes_lifetime = prometheus_client.Histogram(
            f"{ns}_nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation",
            ["nodepool"],
            buckets=naming.LIFETIME_BUCKETS,
            registry=r,
        )
        self.pods_drained = prometheus_client.Counter(
            f"{ns}_pods_drained",
            "Pods drained during node termination, by the disruption reason of their node",
            ["reason"],
            registry=r,
        )
        self.pods_eviction_requests = prometheus_client.Counter(
            f"{ns}_pods_eviction_requests",
            "Pod eviction requests made, by response code",
            ["code"],
            registry=r,
        )
        self.nodeclaims_termination_duration = prometheus_client.Histogram(
            f"{ns}_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds",
            ["nodepool"],
            buckets=tuple(2.0**e for e in range(12)),  # upstream ExponentialBuckets(1, 2, 12)
            registry=r,
        )
        self.nodeclaims_instance_termination_duration = prometheus_client.Histogram(
            f"{ns}_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds",
            ["nodepool"],
            buckets=tuple(2.0**e for e in range(11)),  # upstream ExponentialBuckets(1, 2, 11)
            registry=r,
        )
        self.nodes_terminated = prometheus_client.Counter(
            f"{ns}_nodes_terminated", "Nodes drained and terminated", ["nodepool", "zone"], registry=r
        )

    def nodeclaim_created(
        self, nodepool_name: str, min_values_relaxed: bool = False, *, reason: str = PROVISIONING_REASON
    ) -> None:
        """A NodeClaim created; `min_values_relaxed` as its karpenter.sh/nodeclaim-min-values-relaxed annotation
        says (core: provisioning/provisioner.go `Create`, which counts a claim without it as not relaxed)."""
        relaxed = "true" if min_values_relaxed else "false"
        self.nodeclaims_created.labels(reason=reason, nodepool=nodepool_name, min_values_relaxed=relaxed).inc()

    def nodeclaim_create_failed(self, nodepool_name: str, reason: str) -> None:
        self.nodeclaims_create_failed.labels(nodepool=nodepool_name, reason=reason).inc()

    def nodeclaim_disrupted(
        self,
        reason: str,
        nodepool_name: str,
        capacity_type: str,
        /,
        *,
        consolidation_policy: str = "",
        termination_mode: str = "",
        pods: int = 0,
    ) -> None:
        """One NodeClaim deleted for `reason` (a disruption reason such as Drifted or Expired, or an upstream
        label value already), counted under upstream's snake_case label value, and its reschedulable `pods` as
        disruptions initiated."""
        values = {
            "reason": naming.snake_case(reason), "nodepool": nodepool_name, "capacity_type": capacity_type,
            "consolidation_policy": naming.snake_case(consolidation_policy), "termination_mode": termination_mode,
        }  # fmt: skip
        self.nodeclaims_disrupted.labels(**values).inc()
        self.pods_disruption_initiated.labels(**values).inc(pods)

    def replacement_created(self, nodepool_name: str, reason: str, min_values_relaxed: bool = False) -> None:
        """A replacement NodeClaim launched by the disruption queue, counted like upstream under the lowercased
        disruption reason (empty, drifted, underutilized)."""
        self.nodeclaim_created(nodepool_name, min_values_relaxed, reason=naming.snake_case(reason))

    def nodeclaim_terminated(self, nodepool_name: str, capacity_type: str = "", zone: str = "") -> None:
        self.nodeclaims_terminated.labels(nodepool=nodepool_name, capacity_type=capacity_type, zone=zone).inc()

    def node_created(self, nodepool_name: str, zone: str = "") -> None:
        self.nodes_created.labels(nodepool=nodepool_name, zone=zone).inc()

    def node_terminated(self, nodepool_name: str, zone: str = "") -> None:
        self.nodes_terminated.labels(nodepool=nodepool_name, zone=zone).inc()

    def drift_hooks(self) -> conditions_controller.Metrics:
        return _DriftHooks(self)

    def expiry_hooks(self) -> expiration.Metrics:
        return _ExpiryHooks(self)

    def repair_hooks(self) -> repair.Metrics:
        return _RepairHooks(self)

    def nodeclaim_hooks(self) -> lifecycle_observer.Metrics:
        return _NodeClaimHooks(self)

    def termination_hooks(self) -> termination_observer.Metrics:
        return _TerminationHooks(self)


class Disrupted(nodeclaim.Disruptions):
    """`disrupted` on the lifecycle series, for every reconciler's metrics that delete NodeClaims."""

    def __init__(self, claims: LifecycleSeries) -> None:
        self._claims = claims

    def disrupted(self, reason: str, nodepool: str, capacity_type: str, /, **labels: Any) -> None:
        self._claims.nodeclaim_disrupted(reason, nodepool, capacity_type, **labels)


class _DriftHooks(conditions_controller.Metrics):
    def __init__(self, claims: LifecycleSeries) -> None:
        self._claims = claims

    def drifted(self, reason: str, nodepool: str) -> None:
        self._claims.nodeclaims_drifted.labels(type=reason, nodepool=nodepool).inc()


class _ExpiryHooks(Disrupted, expiration.Metrics):
    pass


class _RepairHooks(Disrupted, repair.Metrics):
    def unhealthy_disrupted(self, condition: str, nodepool: str, capacity_type: str, image_id: str) -> None:
        self._claims.nodeclaims_unhealthy_disrupted.labels(
            condition=condition, nodepool=nodepool, capacity_type=capacity_type, image_id=image_id
        ).inc()


class _NodeClaimHooks(Disrupted, lifecycle_observer.Metrics):
    def instance_terminated(self, nodepool: str, seconds: float) -> None:
        self._claims.nodeclaims_instance_termination_duration.labels(nodepool=nodepool).observe(seconds)

    def terminated(self, nodepool: str, seconds: float) -> None:
        self._claims.nodeclaims_termination_duration.labels(nodepool=nodepool).observe(seconds)


class _TerminationHooks(termination_observer.Metrics):
    def __init__(self, claims: LifecycleSeries) -> None:
        self._claims = claims

    def node_terminated(self, nodepool: str, zone: str) -> None:
        self._claims.node_terminated(nodepool, zone)

    def node_released(self, nodepool: str, since_deletion: float | None, lifetime: float | None) -> None:
        if since_deletion is not None:
            self._claims.nodes_termination_duration.labels(nodepool=nodepool).observe(since_deletion)
        if lifetime is not None:
            self._claims.nodes_lifetime.labels(nodepool=nodepool).observe(lifetime)

    def node_drained(self, nodepool: str) -> None:
        self._claims.nodes_drained.labels(nodepool=nodepool).inc()

    def eviction_requested(self, code: str) -> None:
        self._claims.pods_eviction_requests.labels(code=code).inc()

    def pod_drained(self, reason: str) -> None:
        self._claims.pods_drained.labels(reason=reason).inc()
