"""Voluntary disruption series: decisions, their evaluation time, consolidation timeouts, failed validations,
queue failures, eligible nodes, and the Balanced policy's moves and scores (core:
pkg/controllers/disruption/metrics.go), and the disruption loop's hooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import prometheus_client
from prometheus_client import registry as prometheus_client_registry

from karpy.disruption import metrics as disruption_metrics
from karpy.runtime.metrics import lifecycle, naming

CONSOLIDATION_TYPES: Final[Mapping[str, str]] = {
    "emptiness": "empty",
    "multi-node-consolidation": "multi",
    "single-node-consolidation": "single",
}
"""consolidation_type of a disruption method (upstream `ConsolidationType()`; drift has none)."""


SCORE_BUCKETS: Final = (0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0)
"""Upstream's buckets for karpenter_consolidation_score, around the 1/K threshold (core: disruption/metrics.go)."""


class DisruptionSeries:
    """The voluntary disruption counters, histogram and gauge, and the hooks that feed them."""

    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        r, ns = registry, naming.NAMESPACE
        self.decisions = prometheus_client.Counter(
            f"{ns}_voluntary_disruption_decisions",
            "Disruption decisions taken",
            ["decision", "reason", "consolidation_type"],
            registry=r,
        )
        self.pool_decisions = prometheus_client.Counter(
            f"{ns}_voluntary_disruption_decisions_by_nodepool",
            "Disruption decisions taken, by NodePool of their candidates",
            ["nodepool", "decision", "reason", "consolidation_type"],
            registry=r,
        )
        self.evaluation = prometheus_client.Histogram(
            f"{ns}_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds, by method",
            ["reason", "consolidation_type"],
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.consolidation_timeouts = prometheus_client.Counter(
            f"{ns}_voluntary_disruption_consolidation_timeouts",
            "Times a consolidation method reached its timeout",
            ["consolidation_type"],
            registry=r,
        )
        self.failed_validations = prometheus_client.Counter(
            f"{ns}_voluntary_disruption_failed_validations",
            "Candidates selected for disruption that failed validation",
            ["consolidation_type"],
            registry=r,
        )
        self.queue_failures = prometheus_client.Counter(
            f"{ns}_voluntary_disruption_queue_failures",
            "Replacements of disruption commands the queue gave up on before they initialized",
            ["decision", "reason", "consolidation_type"],
            registry=r,
        )
        self.eligible_nodes = prometheus_client.Gauge(
            f"{ns}_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            ["reason"],
            registry=r,
        )
        self.consolidation_moves = prometheus_client.Counter(
            f"{ns}_consolidation_moves",
            "Consolidation moves the Balanced policy judged, by decision, NodePool and consolidation policy",
            ["decision", "nodepool", "policy"],
            registry=r,
        )
        self.consolidation_score = prometheus_client.Histogram(
            f"{ns}_consolidation_score",
            "Balanced policy scores of consolidation moves, by decision, NodePool and consolidation policy",
            ["decision", "nodepool", "policy"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        for consolidation_type in ("multi", "single"):  # upstream starts both at 0 (disruption/metrics.go init)
            self.consolidation_timeouts.labels(consolidation_type=consolidation_type)

    def decision(self, decision: str, reason: str, consolidation_type: str = "") -> None:
        self.decisions.labels(decision=decision, reason=reason, consolidation_type=consolidation_type).inc()

    def hooks(self, claims: lifecycle.LifecycleSeries) -> disruption_metrics.Metrics:
        """The disruption loop's metrics; replacements and disrupted claims are counted on `claims`."""
        return _Hooks(self, claims)


class _Hooks(lifecycle.Disrupted, disruption_metrics.Metrics):
    """`disruption_metrics.Metrics` on the series: lowercased reasons, the consolidation type of the method."""

    def __init__(self, series: DisruptionSeries, claims: lifecycle.LifecycleSeries) -> None:
        self._series = series
        super().__init__(claims)

    def decision(self, method: str, reason: str, decision: str) -> None:
        self._series.decision(decision, reason.lower(), _kind(method))

    def pool_decision(self, pool: str, method: str, reason: str, decision: str) -> None:
        self._series.pool_decisions.labels(
            nodepool=pool, decision=decision, reason=reason.lower(), consolidation_type=_kind(method)
        ).inc()

    def eligible_nodes(self, reason: str, count: int) -> None:
        self._series.eligible_nodes.labels(reason=reason.lower()).set(count)

    def evaluated(self, method: str, reason: str, seconds: float) -> None:
        self._series.evaluation.labels(reason=reason.lower(), consolidation_type=_kind(method)).observe(seconds)

    def timed_out(self, method: str) -> None:
        self._series.consolidation_timeouts.labels(consolidation_type=_kind(method)).inc()

    def failed_validation(self, method: str, candidates: int) -> None:
        self._series.failed_validations.labels(consolidation_type=_kind(method)).inc(candidates)

    def replacement_created(self, pool: str, reason: str, min_values_relaxed: bool) -> None:
        self._claims.replacement_created(pool, reason, min_values_relaxed)

    def queue_failed(self, method: str, reason: str, decision: str, not_ready: int) -> None:
        # upstream fills consolidation_type with the decision here (disruption/queue.go); karpy puts the
        # consolidation type the label names, as every other disruption series does
        self._series.queue_failures.labels(
            decision=decision, reason=naming.snake_case(reason), consolidation_type=_kind(method)
        ).inc(not_ready)

    def consolidation_move(self, decision: str, pool: str, policy: str) -> None:
        self._series.consolidation_moves.labels(decision=decision, nodepool=pool, policy=policy).inc()

    def consolidation_score(self, score: float, decision: str, pool: str, policy: str) -> None:
        self._series.consolidation_score.labels(decision=decision, nodepool=pool, policy=policy).observe(score)


def _kind(method: str) -> str:
    return CONSOLIDATION_TYPES.get(method, "")
