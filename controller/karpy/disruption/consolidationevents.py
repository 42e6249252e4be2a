"""ConsolidationCandidate and ConsolidationRejected, the events upstream publishes on each source Node and NodeClaim
of a consolidation command it computed, and of one that failed its re-check (pure; core:
pkg/controllers/disruption/events/events.go, types.go `Command.String`, `StringForNode`). Emptiness and drift
publish neither. ConsolidationApproved and the Balanced policy's verdict on each pool a move touches (core:
disruption/balanced.go), which feed karpenter_consolidation_moves_total and karpenter_consolidation_score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from karpy.api import nodepool
from karpy.disruption import candidates, consolidation, validation

CONSOLIDATION_CANDIDATE: Final = "ConsolidationCandidate"
CONSOLIDATION_REJECTED: Final = "ConsolidationRejected"
CONSOLIDATION_APPROVED: Final = "ConsolidationApproved"
APPROVED: Final = "approved"
REJECTED: Final = "rejected"
CONSOLIDATION_METHODS: Final = frozenset({"single-node-consolidation", "multi-node-consolidation"})
"""The methods whose commands upstream announces (core: disruption/consolidation.go `computeConsolidation`)."""


def announced(command: consolidation.Command) -> bool:
    return command.method in CONSOLIDATION_METHODS


def describe(command: consolidation.Command) -> str:
    """`Underutilized: replace: nodepools=[web]: [a, b] -> [1 replacement] (savings: $0.12)` (upstream's form,
    without the command id karpy does not give commands)."""
    sources = ", ".join(c.node_name or c.name for c in command.candidates)
    pools = ",".join(dict.fromkeys(c.pool.name for c in command.candidates))
    moved = f"[{sources}]"
    if command.replacements:
        count = len(command.replacements)
        moved += f" -> [{count} replacement{'' if count == 1 else 's'}]"
    return f"{command.reason}: {command.decision}: nodepools=[{pools}]: {moved} (savings: ${command.savings:.2f})"


def describe_for(command: consolidation.Command, candidate: candidates.Candidate) -> str:
    """The command as one of its source nodes sees it: the whole command when it is the only one."""
    if len(command.candidates) == 1:
        return describe(command)
    name = candidate.node_name or candidate.name
    return f"{command.decision}: [{name}] (part of {len(command.candidates)}-node consolidation)"


def candidate_message(command: consolidation.Command, candidate: candidates.Candidate) -> str:
    return f"Consolidation candidate: {describe_for(command, candidate)} (savings: ${command.savings:.2f})"


def rejected_message(
    command: consolidation.Command, candidate: candidates.Candidate, invalid: validation.Invalid
) -> str:
    return (
        f"Consolidation rejected: {describe_for(command, candidate)}, reason: {invalid.failure} "
        f"(savings: ${command.savings:.2f})"
    )


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """One pool's part of a scored move: the move's decision (every pool of a move counts it), and the pool's own
    Balanced score when its policy is Balanced."""

    pool: nodepool.NodePool
    move: str
    score: consolidation.BalancedScore | None

    @property
    def policy(self) -> str:
        return str(self.pool.disruption.consolidation_policy)

    @property
    def score_decision(self) -> str:
        return APPROVED if self.score is not None and self.score.approved else REJECTED


def verdicts(scored: consolidation.Scored) -> list[PoolVerdict]:
    move = APPROVED if scored.approved else REJECTED
    pools = {c.pool.name: c.pool for c in scored.command.candidates}
    return [PoolVerdict(pool, move, scored.scores.get(name)) for name, pool in pools.items()]


def approved_message(score: consolidation.BalancedScore) -> str:
    """`score 1.50 >= threshold 0.50 (k: 2, savings 30.0%, disruption 20.0%)` (upstream's form)."""
    return (
        f"score {score.score:.2f} >= threshold {score.threshold:.2f} (k: {score.k}, "
        f"savings {score.savings_fraction * 100:.1f}%, disruption {score.disruption_fraction * 100:.1f}%)"
    )


def approved_sources(scored: consolidation.Scored) -> Sequence[candidates.Candidate]:
    """Whose Node and NodeClaim hear of an approved single-node move; a multi-node move is told its NodePools."""
    return scored.command.candidates if len(scored.command.candidates) == 1 else ()
