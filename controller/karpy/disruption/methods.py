"""The disruption methods, tried in order each pass; the first that returns a command acts (core: disruption/*.go).

Every method reads one `Context` (a snapshot of candidates, budgets and a simulation function) and is pure apart from
its own memo: Emptiness and the consolidations remember the cluster `seq` at which they found nothing to do and
skip until the cluster changes (upstream `markConsolidated`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpy import clock as clock_mod
from karpy.api import nodeclaim, nodepool
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import consolidation, simulation

MULTI_NODE_TIMEOUT = 60.0
SINGLE_NODE_TIMEOUT = 180.0
MULTI_NODE_MAX_BATCH = 100

Reason = nodepool.DisruptionReason
Command = consolidation.Command
Candidate = candidates_mod.Candidate


def _ignore(candidate: Candidate, reason: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Context:
    clock: clock_mod.Clock
    seq: int  # cluster.seq when the snapshot was taken
    graceful: Sequence[Candidate]  # candidates for emptiness and consolidation
    eventual: Sequence[Candidate]  # candidates for drift (pod blockers tolerated under a terminationGracePeriod)
    budgets: Mapping[Reason, Mapping[str, int]]
    simulate: simulation.Simulate
    spot_to_spot: bool = False
    unconsolidatable: Callable[[Candidate, str], None] = field(default=_ignore)


class Method(Protocol):
    reason: Reason

    @property
    def name(self) -> str: ...

    def compute(self, ctx: Context) -> Command | None: ...


def _within_budget(candidates: Sequence[Candidate], budgets: Mapping[str, int]) -> list[Candidate]:
    """The candidates, in order, that their pool's remaining budget still allows (each one taken uses one)."""
    left = dict(budgets)
    chosen = []
    for c in candidates:
        if left.get(c.pool.name, 0) > 0:
            left[c.pool.name] -= 1
            chosen.append(c)
    return chosen


def _consolidatable(c: Candidate) -> bool:
    return c.pool.disruption.consolidate_after is not None and c.claim.is_true(nodeclaim.CONSOLIDATABLE)


class Emptiness:
    """Delete every empty, consolidatable node the per-pool `Empty` budgets allow, in one command."""

    reason = Reason.EMPTY
    name = "emptiness"

    def __init__(self) -> None:
        self._nothing_at: int | None = None

    def compute(self, ctx: Context) -> Command | None:
        if self._nothing_at == ctx.seq:
            return None
        empty = [c for c in candidates_mod.by_savings(ctx.graceful) if c.is_empty and _consolidatable(c)]
        chosen = _within_budget(empty, ctx.budgets.get(self.reason, {}))
        if not chosen:
            self._nothing_at = ctx.seq
            return None
        return Command(self.name, self.reason, tuple(chosen))


class Drift:
    """Replace drifted nodes one per command, oldest drift first and empty ones before busy ones."""

    reason = Reason.DRIFTED
    name = "drift"

    def compute(self, ctx: Context) -> Command | None:
        drifted = [c for c in ctx.eventual if c.claim.is_true(nodeclaim.DRIFTED)]
        drifted.sort(key=lambda c: (not c.is_empty, candidates_mod.condition_since(c.claim, nodeclaim.DRIFTED), c.name))
        budget = ctx.budgets.get(self.reason, {})
        for c in drifted:
            if budget.get(c.pool.name, 0) <= 0:
                continue
            if c.is_empty:
                return Command(self.name, self.reason, (c,))
            sim = ctx.simulate([c], consolidation=False)  # consolidateAfter bounds consolidation, not drift
            if not sim.all_scheduled:
                key, why = next(iter(sorted(sim.unschedulable.items())))
                ctx.unconsolidatable(c, f"drift replacement: not all pods would schedule, {key} => {why}")
                continue
            return Command(self.name, self.reason, (c,), sim.replacements)
        return None


def _underutilized(ctx: Context) -> list[Candidate]:
    out = []
    for c in candidates_mod.by_savings(ctx.graceful):
        if c.is_empty:
            continue  # Emptiness handles it
        if why := consolidation.eligible(c):
            ctx.unconsolidatable(c, why)
            continue
        out.append(c)
    return out


class MultiNodeConsolidation:
    """Binary-search the longest prefix (≤ 100) of the cheapest-to-move nodes that can go with ≤ 1 replacement."""

    reason = Reason.UNDERUTILIZED
    name = "multi-node-consolidation"

    def __init__(self) -> None:
        self._nothing_at: int | None = None

    def compute(self, ctx: Context) -> Command | None:
        if self._nothing_at == ctx.seq:
            return None
        pool = _within_budget(_underutilized(ctx), ctx.budgets.get(self.reason, {}))
        best: Command | None = None
        if len(pool) >= 2:
            start = ctx.clock.now()
            low, high = 1, min(len(pool) - 1, MULTI_NODE_MAX_BATCH)
            while low <= high and ctx.clock.now() - start < MULTI_NODE_TIMEOUT:
                mid = (low + high) // 2
                prefix = pool[: mid + 1]
                cmd = self._try(ctx, prefix, ctx.graceful)
                if cmd is not None:
                    best, low = cmd, mid + 1
                else:
                    high = mid - 1
        if best is None:
            self._nothing_at = ctx.seq
        return best

    def _try(self, ctx: Context, prefix: Sequence[Candidate], members: Sequence[Candidate]) -> Command | None:
        cmd = consolidation.compute(prefix, ctx.simulate, method=self.name, spot_to_spot=ctx.spot_to_spot, single=False)
        if isinstance(cmd, str):
            return None
        return cmd if consolidation.balanced_allows(cmd, members) else None


class SingleNodeConsolidation:
    """Try nodes one at a time, interleaving pools round-robin; pools cut off by the last timeout go first."""

    reason = Reason.UNDERUTILIZED
    name = "single-node-consolidation"

    def __init__(self) -> None:
        self._nothing_at: int | None = None
        self._unseen_pools: list[str] = []

    def compute(self, ctx: Context) -> Command | None:
        if self._nothing_at == ctx.seq:
            return None
        budget = dict(ctx.budgets.get(self.reason, {}))
        order = interleave(_underutilized(ctx), first=self._unseen_pools)
        start = ctx.clock.now()
        for i, c in enumerate(order):
            if ctx.clock.now() - start >= SINGLE_NODE_TIMEOUT:
                # Only pools none of whose nodes were tried lead next time (upstream PreviouslyUnseenNodePools):
                # a pool tried in this pass keeps its place in the round-robin.
                tried = {x.pool.name for x in order[:i]}
                self._unseen_pools = [p for p in dict.fromkeys(x.pool.name for x in order[i:]) if p not in tried]
                return None
            if budget.get(c.pool.name, 0) <= 0:
                continue
            if c.pool.disruption.consolidation_policy == nodepool.ConsolidationPolicy.BALANCED and not (
                consolidation.balanced_allows(Command(self.name, self.reason, (c,)), ctx.graceful)
            ):
                ctx.unconsolidatable(c, "Balanced policy: even deleting the node would not be worth its disruption")
                continue
            cmd = consolidation.compute([c], ctx.simulate, method=self.name, spot_to_spot=ctx.spot_to_spot)
            if isinstance(cmd, str):
                ctx.unconsolidatable(c, cmd)
                continue
            if not consolidation.balanced_allows(cmd, ctx.graceful):
                ctx.unconsolidatable(c, "Balanced policy: savings too small for the disruption")
                continue
            self._unseen_pools = []
            return cmd
        self._unseen_pools = []
        self._nothing_at = ctx.seq
        return None


def interleave(ordered: Sequence[Candidate], *, first: Sequence[str] = ()) -> list[Candidate]:
    """Round-robin across pools keeping each pool's order; pools in `first` lead, the rest follow first sight."""
    queues: dict[str, collections.deque[Candidate]] = {}
    for name in first:
        queues[name] = collections.deque()
    for c in ordered:
        queues.setdefault(c.pool.name, collections.deque()).append(c)
    out: list[Candidate] = []
    while any(queues.values()):
        for q in queues.values():
            if q:
                out.append(q.popleft())
    return out


def default_methods() -> list[Method]:
    return [
        Emptiness(),  # cheapest, safest win first: no pods move (upstream order since v1.5, PR #2180)
        Drift(),  # then bring nodes back in line with their NodePool/NodeClass before optimising cost
        MultiNodeConsolidation(),  # many nodes into ≤ 1 saves the most per disruption pass
        SingleNodeConsolidation(),  # last: one node at a time catches what the prefix search could not
    ]
