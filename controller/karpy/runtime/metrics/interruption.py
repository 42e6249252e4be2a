"""Interruption queue series: messages received, deleted, acted on, failed and dropped, their queue latency and
unhealthy instance statuses (aws: pkg/controllers/interruption/metrics.go), and the poller's hooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import prometheus_client
from prometheus_client import registry as prometheus_client_registry

from karpy.cloudprovider import interruption
from karpy.interruption import observer as interruption_observer
from karpy.runtime.metrics import lifecycle, naming

INTERRUPTION_KINDS: Final[Mapping[str, str]] = {
    interruption.Kind.SPOT_INTERRUPTION: "spot_interrupted",
    interruption.Kind.REBALANCE_RECOMMENDATION: "rebalance_recommendation",
    interruption.Kind.SCHEDULED_CHANGE: "scheduled_change",
    interruption.Kind.INSTANCE_STOPPED: "instance_stopped",
    interruption.Kind.INSTANCE_TERMINATED: "instance_terminated",
    interruption.Kind.NO_OP: "no_op",
}
"""Upstream's label value for a message kind (aws: interruption/messages/types.go `Kind`), used as message_type
and as the reason of `karpenter_nodeclaims_disrupted_total`. Kinds missing here (capacity reservation, status
checks) are snake-cased, the form every upstream kind has."""


def interruption_kind(kind: str) -> str:
    return INTERRUPTION_KINDS.get(kind) or naming.snake_case(kind)


class InterruptionSeries:
    """The interruption counters and latency histogram, and the hooks that feed them."""

    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        r, ns = registry, naming.NAMESPACE
        self.received = prometheus_client.Counter(
            f"{ns}_interruption_received_messages",
            "Interruption messages received",
            ["message_type"],
            registry=r,
        )
        self.deleted = prometheus_client.Counter(
            f"{ns}_interruption_deleted_messages", "Interruption messages deleted", registry=r
        )
        self.actions = prometheus_client.Counter(
            "karpy_interruption_actions_performed",
            "Actions taken on interruption messages",
            ["action_type", "message_type"],
            registry=r,
        )
        self.failed = prometheus_client.Counter(
            "karpy_interruption_failed_messages",
            "Interruption messages whose handling failed (left on the queue for a retry)",
            ["message_type"],
            registry=r,
        )
        self.dropped = prometheus_client.Counter(
            "karpy_interruption_messages_dropped",
            "Interruption messages deleted without being acted on: unreadable (not_json, malformed, "
            "unknown_event), internal_error, or retries_exhausted",
            ["reason"],
            registry=r,
        )
        self.latency = prometheus_client.Histogram(
            f"{ns}_interruption_message_queue_duration_seconds",
            "Time from an interruption event until its message was handled",
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.unhealthy = prometheus_client.Counter(
            f"{ns}_interruption_instance_status_unhealthy",
            "Unique unhealthy instance statuses found by DescribeInstanceStatus, by status-check category",
            ["category"],
            registry=r,
        )

    def hooks(self, claims: lifecycle.LifecycleSeries) -> interruption_observer.Metrics:
        """The poller's hooks; the NodeClaims it disrupts are counted on `claims`."""
        return _Hooks(self, claims)


class _Hooks(interruption_observer.Metrics):
    """`interruption_observer.Metrics` on the series: message kinds under upstream's label values."""

    def __init__(self, series: InterruptionSeries, claims: lifecycle.LifecycleSeries) -> None:
        self._series = series
        self._claims = claims

    def received(self, kind: str) -> None:
        self._series.received.labels(message_type=interruption_kind(kind)).inc()

    def deleted(self, kind: str) -> None:
        self._series.deleted.inc()

    def dropped(self, reason: str) -> None:
        self._series.dropped.labels(reason=reason).inc()

    def action(self, action: str, kind: str) -> None:
        self._series.actions.labels(action_type=action, message_type=interruption_kind(kind)).inc()

    def failed(self, kind: str) -> None:
        self._series.failed.labels(message_type=interruption_kind(kind)).inc()

    def disrupted(self, kind: str, nodepool: str, capacity_type: str) -> None:
        self._claims.nodeclaim_disrupted(interruption_kind(kind), nodepool, capacity_type)

    def latency(self, seconds: float) -> None:
        self._series.latency.observe(seconds)

    def unhealthy(self, category: str) -> None:
        self._series.unhealthy.labels(category=category).inc()
