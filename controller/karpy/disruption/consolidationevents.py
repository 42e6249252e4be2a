"""ConsolidationCandidate and ConsolidationRejected, the events upstream publishes on each source Node and NodeClaim
of a consolidation command it computed, and of one that failed its re-check (pure; core:
pkg/controllers/disruption/events/events.go, types.go `Command.String`, `StringForNode`). Emptiness and drift
publish neither."""

from __future__ import annotations

from typing import Final

from karpy.disruption import candidates, consolidation, validation

CONSOLIDATION_CANDIDATE: Final = "ConsolidationCandidate"
CONSOLIDATION_REJECTED: Final = "ConsolidationRejected"
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
