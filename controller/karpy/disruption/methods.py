"""The disruption methods, tried in order each pass; the first that returns a command acts (core: disruption/*.go).

Every method reads one `Context` (a snapshot of candidates, budgets and a simulation function) and is pure apart from
its own memo: Emptiness and the consolidations remember the cluster `seq` at which they found nothing to do and
skip until the cluster changes (upstream `markConsolidated`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from karpy import clock as karpy_clock
from karpy.api import donotdisrupt, nodeclaim, nodepool
from karpy.disruption import blockers, consolidation, simulation
from karpy.disruption import candidates as disruption_candidates
from karpy.scheduling import catalog
from karpy.state import nodepoolstate, statenode

MULTI_NODE_TIMEOUT = 60.0
SINGLE_NODE_TIMEOUT = 180.0
MULTI_NODE_MAX_BATCH = 100

Reason = nodepool.DisruptionReason
Command = consolidation.Command
Candidate = disruption_candidates.Candidate


@dataclass(frozen=True, slots=True)
class Note:
    """A candidate a method passed over, and why. `event` is the Event reason the controller records about the
    node and its NodeClaim for it (upstream publishes these); "" for what only `karpy explain` reports."""

    candidate: Candidate
    method: str
    blocker: blockers.Blocker
    event: str = ""


class Observer:
    """What a pass tells while its methods compute, by name: one per disruption loop (its `publisher.Publisher`
    turns each into Events and metrics). This base tells no one (`karpy explain`, tests, benchmarks)."""

    def note(self, note: Note) -> None:
        """A candidate a method passed over, and why."""

    def evaluated(self, method: Method, ctx: Context, seconds: float) -> None:
        """A method a pass tried, with the seconds it took on the context's clock (core: disruption/controller.go
        times each `disrupt(method)`); `ctx` tells how many candidates it considered."""

    def timed_out(self, method: str) -> None:
        """A consolidation gave up at its timeout (karpenter_voluntary_disruption_consolidation_timeouts_total,
        core: disruption/multinodeconsolidation.go, singlenodeconsolidation.go)."""

    def scored(self, scored: consolidation.Scored) -> None:
        """A consolidation move the Balanced policy judged, where upstream reports it (core: disruption/balanced.go
        `ApproveCommand`, `EmitMultiNodeEvents`): every single-node move computed, and a multi-node search's chosen
        move or, when it chose none, its last move the policy rejected."""

    def pod_notice(self, pod: Mapping[str, Any], notice: donotdisrupt.Notice) -> None:
        """A pod's do-not-disrupt Event, read where the pass evaluates the annotation (upstream publishes one
        wherever it does)."""


SILENT: Final = Observer()


@dataclass(frozen=True, slots=True)
class Context:
    clock: karpy_clock.Clock
    seq: int  # cluster.seq when the snapshot was taken
    graceful: Sequence[Candidate]  # candidates for emptiness and consolidation
    eventual: Sequence[Candidate]  # candidates for drift (pod blockers tolerated under a terminationGracePeriod)
    budgets: Mapping[Reason, Mapping[str, int]]
    simulate: simulation.Simulate
    spot_to_spot: bool = False
    observer: Observer = SILENT
    rejected: Sequence[disruption_candidates.Rejection] = ()
    """Nodes that are no candidate (graceful class), and why: each gets a DisruptionBlocked event."""
    blocked: Mapping[Reason, Sequence[nodepool.NodePool]] = field(default_factory=dict)
    """Pools with nodes whose budgets allow no disruption for a reason at all now."""
    failed: Sequence[tuple[statenode.StateNode, Exception]] = ()
    """Nodes whose evaluation raised (a bug): neither candidates nor rejected, left alone."""
    static_counts: Mapping[str, nodepoolstate.Counts] = field(default_factory=dict)
    """Per static NodePool, its NodeClaims active, deleting and pending disruption (`StaticDrift` reads them)."""
    buffer_pods_on: Callable[[str], int] = field(default=lambda _node: 0)
    """Virtual CapacityBuffer pods the provisioner last placed on a node: such a node is not empty."""


def is_static(c: Candidate) -> bool:
    """Owned by a static NodePool (`spec.replicas`): never consolidated, replaced one for one on drift."""
    return c.pool.replicas is not None


class Method(Protocol):
    reason: Reason

    @property
    def name(self) -> str: ...

    def compute(self, ctx: Context) -> Command | None: ...


def split_by_budget(
    candidates: Sequence[Candidate], budgets: Mapping[str, int]
) -> tuple[list[Candidate], list[Candidate]]:
    """(the candidates, in order, that their pool's remaining budget allows, each one taken using one; the rest)."""
    left = dict(budgets)
    chosen, over = [], []
    for c in candidates:
        if left.get(c.pool.name, 0) > 0:
            left[c.pool.name] -= 1
            chosen.append(c)
        else:
            over.append(c)
    return chosen, over


def _note_over_budget(ctx: Context, method: str, reason: Reason, over: Sequence[Candidate]) -> None:
    for c in over:
        ctx.observer.note(Note(c, method, blockers.budget(c.pool.name, str(reason))))


class Emptiness:
    """Delete every empty, consolidatable node the per-pool `Empty` budgets allow, in one command."""

    reason = Reason.EMPTY
    name = "emptiness"

    def __init__(self) -> None:
        self._nothing_at: int | None = None

    def compute(self, ctx: Context) -> Command | None:
        if self._nothing_at == ctx.seq:
            return None
        chosen, over = split_by_budget(self.ready(ctx), ctx.budgets.get(self.reason, {}))
        _note_over_budget(ctx, self.name, self.reason, over)
        if not chosen:
            self._nothing_at = ctx.seq
            return None
        return Command(self.name, self.reason, tuple(chosen))

    def ready(self, ctx: Context) -> list[Candidate]:
        """The empty candidates consolidation may act on, in order (noting the empty ones it may not yet)."""
        out = []
        for c in disruption_candidates.by_savings(ctx.graceful):
            if not c.is_empty or is_static(c):
                continue
            if ctx.buffer_pods_on(c.node.name):  # the buffer's room, launched on purpose (emptiness.go)
                ctx.observer.note(Note(c, self.name, blockers.buffer_pods(c.node.name), blockers.UNCONSOLIDATABLE))
                continue
            why = consolidation.consolidatable_blocker(c, now=ctx.clock.now())
            if why is None:
                out.append(c)
                continue
            disabled = why.kind is blockers.Kind.CONSOLIDATION_DISABLED
            ctx.observer.note(Note(c, self.name, why, blockers.UNCONSOLIDATABLE if disabled else ""))
        return out


class Drift:
    """Replace drifted nodes one per command, oldest drift first and empty ones before busy ones."""

    reason = Reason.DRIFTED
    name = "drift"

    def compute(self, ctx: Context) -> Command | None:
        budget = ctx.budgets.get(self.reason, {})
        for c in self.order(ctx):
            command = self.attempt(ctx, c, budget)
            if command is not None:
                return command
        return None

    def order(self, ctx: Context) -> list[Candidate]:
        drifted = [c for c in ctx.eventual if c.claim.is_true(nodeclaim.DRIFTED) and not is_static(c)]
        drifted.sort(
            key=lambda c: (not c.is_empty, disruption_candidates.condition_since(c.claim, nodeclaim.DRIFTED), c.name)
        )
        return drifted

    def attempt(self, ctx: Context, c: Candidate, budget: Mapping[str, int]) -> Command | None:
        """The command replacing drifted `c`, or None (noted) when its budget or its pods do not allow it."""
        if budget.get(c.pool.name, 0) <= 0:
            _note_over_budget(ctx, self.name, self.reason, [c])
            return None
        if c.is_empty:
            return Command(self.name, self.reason, (c,))
        sim = ctx.simulate([c], consolidation=False)  # consolidateAfter bounds consolidation, not drift
        if not sim.all_scheduled:
            ctx.observer.note(Note(c, self.name, consolidation.pods_do_not_fit(sim), blockers.DISRUPTION_BLOCKED))
            return None
        return Command(self.name, self.reason, (c,), sim.replacements)


class StaticDrift:
    """Replace a drifted node of a static pool with a fresh NodeClaim of the pool, one for one (core:
    disruption/staticdrift.go): no simulation (the pool's nodes take no scheduled pods of their own), within the
    Drifted budget and `limits.nodes`, and not while the pool is above its replicas (scale-down goes first)."""

    reason = Reason.DRIFTED
    name = "static-drift"

    def compute(self, ctx: Context) -> Command | None:
        budget = ctx.budgets.get(self.reason, {})
        drifted = [c for c in ctx.eventual if is_static(c) and c.claim.is_true(nodeclaim.DRIFTED)]
        drifted.sort(key=lambda c: (disruption_candidates.condition_since(c.claim, nodeclaim.DRIFTED), c.name))
        for c in drifted:
            found = ctx.static_counts.get(c.pool.name, nodepoolstate.Counts())
            if found.active + found.pending > (c.pool.replicas or 0):
                continue  # scaling down: the excess goes first, and may be this very node
            if budget.get(c.pool.name, 0) <= 0:
                _note_over_budget(ctx, self.name, self.reason, [c])
                continue
            room = nodepoolstate.headroom(c.pool, found)
            if room is not None and room <= 0:
                continue
            return Command(self.name, self.reason, (c,), (catalog.static_plan(c.pool),))
        return None


def _underutilized(ctx: Context, method: str) -> list[Candidate]:
    out = []
    now = ctx.clock.now()
    for c in disruption_candidates.by_savings(ctx.graceful):
        if c.is_empty or is_static(c):
            continue  # Emptiness handles it; a static pool keeps its replicas
        if why := consolidation.eligible(c, now=now):
            event = "" if why.kind is blockers.Kind.CONSOLIDATE_AFTER else blockers.UNCONSOLIDATABLE
            ctx.observer.note(Note(c, method, why, event))
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
        pool, over = split_by_budget(_underutilized(ctx, self.name), ctx.budgets.get(self.reason, {}))
        best: Command | None = None
        best_scored: consolidation.Scored | None = None
        rejected: consolidation.Scored | None = None
        if len(pool) >= 2:
            start = ctx.clock.now()
            low, high = 1, min(len(pool) - 1, MULTI_NODE_MAX_BATCH)
            while low <= high:
                if ctx.clock.now() - start >= MULTI_NODE_TIMEOUT:
                    ctx.observer.timed_out(self.name)
                    break
                mid = (low + high) // 2
                prefix = pool[: mid + 1]
                scored = self._try(ctx, prefix, ctx.graceful)
                if scored is not None and scored.approved:
                    best, best_scored, low = scored.command, scored, mid + 1
                else:
                    rejected = scored or rejected
                    high = mid - 1
        reported = best_scored or rejected
        if reported is not None:
            ctx.observer.scored(reported)
        if best is None and not over:  # a budget may open without the cluster changing (multinodeconsolidation.go)
            self._nothing_at = ctx.seq
        return best

    def _try(
        self, ctx: Context, prefix: Sequence[Candidate], members: Sequence[Candidate]
    ) -> consolidation.Scored | None:
        """The move consolidating `prefix` with the Balanced policy's scores, or None when there is none."""
        cmd = consolidation.compute(prefix, ctx.simulate, method=self.name, spot_to_spot=ctx.spot_to_spot, single=False)
        if isinstance(cmd, blockers.Blocker):
            return None
        return consolidation.Scored(cmd, consolidation.balanced_scores(cmd, members))


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
        budget = ctx.budgets.get(self.reason, {})
        order = self.order(ctx)
        start = ctx.clock.now()
        for i, c in enumerate(order):
            if ctx.clock.now() - start >= SINGLE_NODE_TIMEOUT:
                ctx.observer.timed_out(self.name)
                # Only pools none of whose nodes were tried lead next time (upstream PreviouslyUnseenNodePools):
                # a pool tried in this pass keeps its place in the round-robin.
                tried = {x.pool.name for x in order[:i]}
                self._unseen_pools = [p for p in dict.fromkeys(x.pool.name for x in order[i:]) if p not in tried]
                return None
            cmd = self.attempt(ctx, c, budget)
            if cmd is not None:
                self._unseen_pools = []
                return cmd
        self._unseen_pools = []
        if all(budget.get(c.pool.name, 0) > 0 for c in order):  # as Multi-node: no memo when a budget held one back
            self._nothing_at = ctx.seq
        return None

    def order(self, ctx: Context) -> list[Candidate]:
        """The consolidatable, non-empty candidates in the order they are tried (noting the others)."""
        return interleave(_underutilized(ctx, self.name), first=self._unseen_pools)

    def attempt(self, ctx: Context, c: Candidate, budget: Mapping[str, int]) -> Command | None:
        """The command consolidating `c` alone, or None (noted) when its budget, policy or a simulation refuses."""
        if budget.get(c.pool.name, 0) <= 0:
            _note_over_budget(ctx, self.name, self.reason, [c])
            return None
        if c.pool.disruption.consolidation_policy == nodepool.ConsolidationPolicy.BALANCED and not (
            consolidation.balanced_allows(Command(self.name, self.reason, (c,)), ctx.graceful)
        ):
            why = "Balanced policy: even deleting the node would not be worth its disruption"
            ctx.observer.note(
                Note(c, self.name, blockers.Blocker(blockers.Kind.POLICY, why), blockers.UNCONSOLIDATABLE)
            )
            return None
        cmd = consolidation.compute([c], ctx.simulate, method=self.name, spot_to_spot=ctx.spot_to_spot)
        if isinstance(cmd, blockers.Blocker):
            ctx.observer.note(Note(c, self.name, cmd, blockers.UNCONSOLIDATABLE))
            return None
        scored = consolidation.Scored(cmd, consolidation.balanced_scores(cmd, ctx.graceful))
        ctx.observer.scored(scored)
        if not scored.approved:
            why = "Balanced policy: savings too small for the disruption"
            ctx.observer.note(
                Note(c, self.name, blockers.Blocker(blockers.Kind.POLICY, why), blockers.UNCONSOLIDATABLE)
            )
            return None
        return cmd


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


def eligible_count(method: Method, ctx: Context) -> int | None:
    """How many candidates `method` considers at all, before budgets and simulations (upstream's `ShouldDisrupt`
    filters: core disruption/emptiness.go, drift.go, staticdrift.go, consolidation.go): what upstream reports per
    method tried as karpenter_voluntary_disruption_eligible_nodes (disruption/controller.go `disrupt`). None for a
    method of another module."""
    now = ctx.clock.now()
    if isinstance(method, StaticDrift | Drift):
        static = isinstance(method, StaticDrift)
        return sum(1 for c in ctx.eventual if is_static(c) == static and c.claim.is_true(nodeclaim.DRIFTED))
    if isinstance(method, Emptiness):
        return sum(
            1
            for c in ctx.graceful
            if c.is_empty and not is_static(c) and consolidation.consolidatable_blocker(c, now=now) is None
        )
    if isinstance(method, MultiNodeConsolidation | SingleNodeConsolidation):
        return sum(1 for c in ctx.graceful if not is_static(c) and consolidation.eligible(c, now=now) is None)
    return None


def default_methods() -> list[Method]:
    return [
        Emptiness(),  # cheapest, safest win first: no pods move (upstream order since v1.5, PR #2180)
        StaticDrift(),  # static pools' drift before dynamic drift, as upstream orders them (v1.8+)
        Drift(),  # then bring nodes back in line with their NodePool/NodeClass before optimising cost
        MultiNodeConsolidation(),  # many nodes into ≤ 1 saves the most per disruption pass
        SingleNodeConsolidation(),  # last: one node at a time catches what the prefix search could not
    ]
