"""What the disruption loop and its queue count, by name (core: pkg/controllers/disruption/metrics.go).

The operator's subclass binds each to its Prometheus series (`karpy.runtime.metrics.disruption`); this one counts
nothing, for tests, benchmarks and offline tools.
"""

from __future__ import annotations

from karpy.api import nodeclaim


class Metrics(nodeclaim.Disruptions):
    """`disrupted`: the queue deleted a candidate NodeClaim, on the NodeClaim lifecycle's own counter, which
    expiration, repair and interruption count on too."""

    def decision(self, method: str, reason: str, decision: str) -> None:
        """A command acted on (or logged in dry-run); `decision` is "delete" or "replace"."""

    def pool_decision(self, pool: str, method: str, reason: str, decision: str) -> None:
        """Once per NodePool of every command acted on (core: disruption/queue.go `NodepoolDecisionsPerformed`)."""

    def eligible_nodes(self, reason: str, count: int) -> None:
        """The candidates a method considers, for every method a pass tried (gauge)."""

    def evaluated(self, method: str, reason: str, seconds: float) -> None:
        """How long a method a pass tried took (core: disruption/controller.go `disrupt`)."""

    def timed_out(self, method: str) -> None:
        """A consolidation method gave up at its timeout."""

    def failed_validation(self, method: str, candidates: int) -> None:
        """A command failed its re-check (core: disruption/validation.go)."""

    def replacement_created(self, pool: str, reason: str, min_values_relaxed: bool) -> None:
        """The queue created a replacement NodeClaim."""

    def queue_failed(self, method: str, reason: str, decision: str, not_ready: int) -> None:
        """The queue abandoned a command whose `not_ready` replacements did not initialize."""

    def consolidation_move(self, decision: str, pool: str, policy: str) -> None:
        """Per pool of a move the Balanced policy scored, "approved" or "rejected" (core: disruption/balanced.go
        `ConsolidationMovesTotal`)."""

    def consolidation_score(self, score: float, decision: str, pool: str, policy: str) -> None:
        """Per Balanced pool of a scored move (`ConsolidationScoreHistogram`)."""
