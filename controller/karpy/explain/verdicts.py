"""Every node's disruption verdict, by the disruption controller's own code.

`explain` takes the `methods.Context` a pass builds (`disruption.passes.context`) and

1. runs the pass: the methods in order, fresh (no "nothing to do" memo); its first command is what the controller's
   next pass acts on (after its validation, which abandons it only if the cluster changed meanwhile);
2. surveys every other node with the methods' own per-candidate decisions (emptiness's readiness, `Drift.attempt`,
   `SingleNodeConsolidation.attempt`) against the budgets as they stood before the pass: a node the pass leaves out
   only because the pass spends its pool's budget is `eligible` (a later pass takes it), one that a rule or an
   empty budget stops is `blocked`, with every reason the methods gave;
3. reads back, from the simulations made, where each of a node's pods would go.

Simulations are the expensive part (each is a solve over the whole cluster). The pass makes as many as the
controller's pass would; the survey makes at most `simulations` more, in the order single-node consolidation tries
nodes, plus one for the focused node. A candidate left unsimulated is reported as `not-simulated`, never guessed.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy.api import nodepool
from karpy.disruption import blockers, candidates, consolidation, methods, passes, simulation
from karpy.scheduling import results
from karpy.state import statenode

DEFAULT_SIMULATIONS = 10
"""Survey simulations by default: the underutilized nodes of most clusters; about two seconds at 5,000 nodes."""
CANDIDATE = "candidate"
"""The `method` of reasons that keep a node from being a candidate at all (before any method looks at it)."""
NOT_SIMULATED = "not-simulated"

Reason = nodepool.DisruptionReason


class Verdict(enum.StrEnum):
    DISRUPT = "disrupt"
    """In the command the next pass takes."""
    ELIGIBLE = "eligible"
    """A method would disrupt it, in a later pass (this one takes another command, or spends the budget)."""
    BLOCKED = "blocked"
    NOT_SIMULATED = NOT_SIMULATED
    """A consolidation candidate whose simulation the survey did not run (raise the limit, or focus on it)."""


@dataclass(frozen=True, slots=True)
class Why:
    method: str
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Move:
    pod: str
    to: str
    """"node/<name>", "replacement/<i>" (the i-th replacement NodeClaim), or "" when it fits nowhere."""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: statenode.StateNode
    verdict: Verdict
    price: float | None = None
    method: str = ""
    decision: str = ""
    savings: float | None = None
    reasons: tuple[Why, ...] = ()
    simulated: bool = False
    moves: tuple[Move, ...] = ()
    replacements: tuple[results.PlannedNodeClaim, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdicts:
    nodes: tuple[NodeVerdict, ...]
    next_pass: consolidation.Command | None
    next_moves: tuple[Move, ...]
    budgets: Mapping[str, Mapping[str, int]]
    """Pool name -> disruption reason -> how many nodes its budgets still allow now."""
    simulations: int


class OverLimit(Exception):
    """A simulation the survey may not make any more."""


class Simulations:
    """`Context.simulate`, remembered: every set of candidates is simulated once, and can be read back. While
    `refuse` is set, a simulation not made yet raises OverLimit instead."""

    def __init__(self, inner: simulation.Simulate) -> None:
        self._inner = inner
        self.seen: dict[tuple[tuple[str, ...], bool], simulation.Simulation] = {}
        self.refuse = False

    def __call__(
        self, chosen: Sequence[candidates.Candidate], /, *, consolidation: bool = True
    ) -> simulation.Simulation:
        key = (tuple(c.name for c in chosen), consolidation)
        found = self.seen.get(key)
        if found is None:
            if self.refuse:
                raise OverLimit(key)
            found = self.seen[key] = self._inner(chosen, consolidation=consolidation)
        return found


@dataclass
class _Survey:
    """What the methods, asked one candidate at a time, would do with each (by NodeClaim name)."""

    drift: dict[str, consolidation.Command] = dataclasses.field(default_factory=dict)
    single: dict[str, consolidation.Command] = dataclasses.field(default_factory=dict)
    unsimulated: set[str] = dataclasses.field(default_factory=set)


@dataclass(frozen=True, slots=True)
class _Decision:
    verdict: Verdict
    method: str = ""
    decision: str = ""
    savings: float | None = None
    reasons: tuple[Why, ...] = ()
    command: consolidation.Command | None = None
    """The command that decided it (the pass's, or the one the node would get alone)."""


class _Notes(methods.Observer):
    """Why the pass's methods passed over each candidate (nothing is published)."""

    def __init__(self) -> None:
        self.notes: list[methods.Note] = []

    def note(self, note: methods.Note) -> None:
        self.notes.append(note)


def explain(
    ctx: methods.Context,
    *,
    price: Callable[[statenode.StateNode], float | None],
    focus: str = "",
    simulations: int = DEFAULT_SIMULATIONS,
    nodes: bool = True,
) -> Verdicts:
    """Verdicts for every node (only the node named `focus`, when given; none without `nodes`: the next pass
    only, as for a pending pod); `simulations` < 0: no limit."""
    observed = _Notes()
    sims = Simulations(ctx.simulate)
    ctx = dataclasses.replace(ctx, simulate=sims, observer=observed)
    notes = observed.notes
    command = passes.first_command(methods.default_methods(), ctx)
    survey = _survey(ctx, sims, command, focus=focus, limit=simulations) if nodes else _Survey()
    why = _reasons(notes, ctx.rejected)
    left = _budgets_after(ctx.budgets, command)
    graceful = {c.node.name: c for c in ctx.graceful}
    eventual = {c.node.name: c for c in ctx.eventual}
    rejected = {r.node.name: r.node for r in ctx.rejected}
    out = []
    for name in sorted({*graceful, *rejected}) if nodes else ():
        if focus and name != focus:
            continue
        c = graceful.get(name) or eventual.get(name)
        node = c.node if c is not None else rejected[name]
        found = _decide(c, command, survey, left, ctx=ctx, is_candidate=name in graceful, reasons=why.get(name, ()))
        simulated = sims.seen.get(_key(found.command)) if found.command is not None else None
        if simulated is None and c is not None:
            simulated = sims.seen.get(((c.name,), True)) or sims.seen.get(((c.name,), False))
        out.append(
            NodeVerdict(
                node=node,
                verdict=found.verdict,
                price=c.price if c is not None else price(node),
                method=found.method,
                decision=found.decision,
                savings=found.savings,
                reasons=found.reasons,
                simulated=simulated is not None,
                moves=_moves(simulated, [c] if c is not None else []),
                replacements=simulated.replacements if simulated is not None else (),
            )
        )
    next_moves = _moves(sims.seen.get(_key(command)), command.candidates) if command is not None else ()
    return Verdicts(tuple(out), command, next_moves, _by_pool(ctx.budgets), len(sims.seen))


def _survey(
    ctx: methods.Context,
    sims: Simulations,
    command: consolidation.Command | None,
    *,
    focus: str,
    limit: int,
) -> _Survey:
    out = _Survey()
    in_pass = {c.name for c in command.candidates} if command is not None else set()
    made = len(sims.seen)  # the pass's own simulations do not count against the survey's limit

    def skip(c: candidates.Candidate) -> bool:
        return c.name in in_pass or bool(focus and c.node.name != focus)

    def attempt(c: candidates.Candidate, method: Callable[[], consolidation.Command | None]) -> None:
        """Ask `method` about `c`; past the limit its cheap checks still answer, a simulation it needs does not."""
        sims.refuse = c.node.name != focus and 0 <= limit <= len(sims.seen) - made
        try:
            got = method()
        except OverLimit:
            out.unsimulated.add(c.name)
            return
        finally:
            sims.refuse = False
        if got is not None:
            (out.drift if got.reason == Reason.DRIFTED else out.single)[c.name] = got

    drift, single = methods.Drift(), methods.SingleNodeConsolidation()
    for c in drift.order(ctx):
        if not skip(c):
            attempt(c, functools.partial(drift.attempt, ctx, c, ctx.budgets.get(Reason.DRIFTED, {})))
    for c in single.order(ctx):
        if not skip(c) and c.name not in out.drift:
            attempt(c, functools.partial(single.attempt, ctx, c, ctx.budgets.get(Reason.UNDERUTILIZED, {})))
    return out


def _decide(
    c: candidates.Candidate | None,
    command: consolidation.Command | None,
    survey: _Survey,
    left: Mapping[Reason, Mapping[str, int]],
    *,
    ctx: methods.Context,
    is_candidate: bool,
    reasons: Sequence[Why],
) -> _Decision:
    """In method order: the pass's command, drift alone, emptiness, single-node consolidation; else blocked."""
    blocked = _Decision(Verdict.BLOCKED, reasons=tuple(reasons))
    if c is None:
        return blocked
    if command is not None and c.name in {x.name for x in command.candidates}:
        savings = command.savings if len(command.candidates) == 1 else None
        return _Decision(Verdict.DISRUPT, command.method, command.decision, savings, command=command)
    found = survey.drift.get(c.name)
    if found is not None:
        return _eligible(found, c, left, reasons)
    if c.name in survey.unsimulated:
        message = "Not simulated: raise --simulations, or ask about this node alone (--node)"
        return _Decision(Verdict.NOT_SIMULATED, reasons=(*reasons, Why(CANDIDATE, NOT_SIMULATED, message)))
    if not is_candidate:  # a drift candidate only: its pods' blockers stop every graceful method
        return blocked
    if c.is_empty:
        ready = consolidation.consolidatable_blocker(c, now=ctx.clock.now()) is None
        if not ready or ctx.budgets.get(Reason.EMPTY, {}).get(c.pool.name, 0) <= 0:
            return blocked
        return _eligible(consolidation.Command(methods.Emptiness.name, Reason.EMPTY, (c,)), c, left, reasons)
    found = survey.single.get(c.name)
    if found is not None:
        return _eligible(found, c, left, reasons)
    return blocked


def _eligible(
    command: consolidation.Command,
    c: candidates.Candidate,
    left: Mapping[Reason, Mapping[str, int]],
    reasons: Sequence[Why],
) -> _Decision:
    """A node a method would disrupt alone; it waits when the next pass spends its pool's budget for that reason
    (the budget notes the pass made about it say just that, so they give way to this one)."""
    kept = tuple(r for r in reasons if r.kind != blockers.Kind.BUDGET)
    if left.get(command.reason, {}).get(c.pool.name, 0) <= 0:
        message = f'Waits: the next pass uses what NodePool "{c.pool.name}" allows for {command.reason} now'
        kept = (*kept, Why(command.method, str(blockers.Kind.BUDGET), message))
    return _Decision(Verdict.ELIGIBLE, command.method, command.decision, command.savings, kept, command)


def _reasons(notes: Sequence[methods.Note], rejected: Sequence[candidates.Rejection]) -> dict[str, tuple[Why, ...]]:
    """Reasons by node name, in the order given, each said once (several methods note the same thing: the first
    to say it names it)."""
    out: dict[str, dict[tuple[str, str], Why]] = collections.defaultdict(dict)
    for r in rejected:
        out[r.node.name].setdefault(
            (r.blocker.kind, r.blocker.message), Why(CANDIDATE, r.blocker.kind, r.blocker.message)
        )
    for n in notes:
        found = Why(n.method, n.blocker.kind, n.blocker.message)
        out[n.candidate.node.name].setdefault((found.kind, found.message), found)
    return {name: tuple(found.values()) for name, found in out.items()}


def _budgets_after(
    budgets: Mapping[Reason, Mapping[str, int]], command: consolidation.Command | None
) -> dict[Reason, dict[str, int]]:
    out = {reason: dict(by_pool) for reason, by_pool in budgets.items()}
    if command is not None:
        for c in command.candidates:
            pools = out.setdefault(command.reason, {})
            pools[c.pool.name] = pools.get(c.pool.name, 0) - 1
    return out


def _by_pool(budgets: Mapping[Reason, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for reason, by_pool in budgets.items():
        for pool, allowed in by_pool.items():
            out[pool][str(reason)] = allowed
    return dict(out)


def _key(command: consolidation.Command) -> tuple[tuple[str, ...], bool]:
    """The simulation a command rests on (drift simulates without consolidateAfter's settling nodes)."""
    return tuple(c.name for c in command.candidates), command.reason != Reason.DRIFTED


def _moves(found: simulation.Simulation | None, chosen: Sequence[candidates.Candidate]) -> tuple[Move, ...]:
    if found is None:
        return ()
    out = []
    for key in sorted(p.key for c in chosen for p in c.reschedulable_pods):
        where = found.placements.get(key, "")
        if where.startswith("claim/"):
            where = "replacement/" + where.removeprefix("claim/")
        out.append(Move(key, where, found.unschedulable.get(key, "")))
    return tuple(out)
