"""Consolidation decisions shared by the methods (pure; core: disruption/consolidation.go).

`compute` turns a simulation of removing some candidates into a command or the reason there is none: all pods must
fit; no new NodeClaim ⇒ delete; one ⇒ replace, only with instance types whose *worst launch price* (the dearest
compatible offering of the capacity type a launch would take: reserved, else spot, else on-demand) is cheaper than
the candidates together, and constrained to spot when it could be spot or on-demand (an ICE must not turn
into a pricier on-demand node). Spot candidates are only deleted unless spot-to-spot consolidation is enabled,
which then requires 15 cheaper spot types for single-node moves and launches only the 15 cheapest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpy import requirements
from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import types
from karpy.disruption import blockers, simulation
from karpy.disruption import candidates as disruption_candidates
from karpy.nodeclaim import disruption_conditions
from karpy.scheduling import results

MIN_SPOT_TO_SPOT_TYPES = 15
"""Cheaper spot types a single-node spot-to-spot replacement needs (and the most it may launch from)."""
BALANCED_K = 2
"""Balanced policy: a move is worth it when its savings share is at least 1/K of its disruption share."""
LAUNCH_PRECEDENCE = (labels.CAPACITY_TYPE_RESERVED, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND)
"""The capacity type a launch takes when several are allowed and offered: the first of these (upstream
getCapacityType)."""


@dataclass(frozen=True, slots=True)
class Command:
    method: str
    reason: nodepool.DisruptionReason
    candidates: tuple[disruption_candidates.Candidate, ...]
    replacements: tuple[results.PlannedNodeClaim, ...] = ()

    @property
    def decision(self) -> str:
        return "replace" if self.replacements else "delete"

    @property
    def savings(self) -> float:
        """$/hour saved: the candidates' prices minus the replacements' cheapest launch prices."""
        return sum(c.price for c in self.candidates) - sum(cheapest_price(r) or 0.0 for r in self.replacements)


def compatible_offerings(instance_type: types.InstanceType, reqs: requirements.Requirements) -> list[types.Offering]:
    zone, capacity_type = reqs.get(labels.LABEL_ZONE), reqs.get(labels.LABEL_CAPACITY_TYPE)
    return [
        o
        for o in instance_type.offerings
        if o.available
        and (zone is None or zone.has(o.zone))
        and (capacity_type is None or capacity_type.has(o.capacity_type))
    ]


def cheapest_price(plan: results.PlannedNodeClaim) -> float | None:
    prices = [o.price for t in plan.instance_type_options for o in compatible_offerings(t, plan.requirements)]
    return min(prices) if prices else None


def worst_launch_price(instance_type: types.InstanceType, reqs: requirements.Requirements) -> float:
    """The most expensive compatible offering of the first capacity type, in launch precedence, that has one (inf
    when none; upstream Offerings.WorstLaunchPrice). A launch takes reserved capacity when it can, else spot, else
    on-demand, so only that capacity type's prices bound what the replacement can cost: the on-demand price of a
    type that may launch as spot must not veto an on-demand → spot replacement."""
    offered = compatible_offerings(instance_type, reqs)
    for capacity_type in LAUNCH_PRECEDENCE:
        prices = [o.price for o in offered if o.capacity_type == capacity_type]
        if prices:
            return max(prices)
    return math.inf


def filter_by_price(
    options: Iterable[types.InstanceType], reqs: requirements.Requirements, price: float
) -> tuple[types.InstanceType, ...]:
    """Types whose worst launch price is still cheaper than `price` (upstream
    RemoveInstanceTypeOptionsByPriceAndMinValues; minValues is checked by the callers)."""
    return tuple(it for it in options if worst_launch_price(it, reqs) < price)


def filter_out_same_instance_type(
    plan: results.PlannedNodeClaim, chosen: Sequence[disruption_candidates.Candidate]
) -> tuple[types.InstanceType, ...]:
    """Multi-node: the replacement must be cheaper than the cheapest candidate of any type it shares with them, so
    N nodes are not "consolidated" into one of their own kind at the same price. `plan` is the replacement already
    filtered by price (core: disruption/multinodeconsolidation.go filterOutSameInstanceType runs on
    computeConsolidation's result): a candidate's type that the price filter dropped sets no ceiling."""
    existing: dict[str, float] = {}
    for c in chosen:
        existing[c.instance_type.name] = min(existing.get(c.instance_type.name, float("inf")), c.price)
    ceiling = min((existing[t.name] for t in plan.instance_type_options if t.name in existing), default=float("inf"))
    return filter_by_price(plan.instance_type_options, plan.requirements, ceiling)


def _without_same_type(
    plan: results.PlannedNodeClaim, chosen: Sequence[disruption_candidates.Candidate]
) -> results.PlannedNodeClaim | blockers.Blocker:
    """`plan` less the options `filter_out_same_instance_type` drops, or why nothing of it is left."""
    options = filter_out_same_instance_type(plan, chosen)
    why = _none_cheaper(options, plan.requirements)
    return why if why is not None else dataclasses.replace(plan, instance_type_options=options)


def _none_cheaper(options: Sequence[types.InstanceType], reqs: requirements.Requirements) -> blockers.Blocker | None:
    """Why the options a price filter left cannot replace the candidates: none left, or too few for minValues."""
    if not options:
        return blockers.Blocker(blockers.Kind.NOT_CHEAPER, "Can't replace with a cheaper node")
    if not types.satisfies_min_values(options, reqs):
        return blockers.Blocker(
            blockers.Kind.MIN_VALUES, "minValues requirement is not met by the cheaper instance types"
        )
    return None


def _with_options(
    plan: results.PlannedNodeClaim, options: Sequence[types.InstanceType], *, spot_only: bool = False
) -> results.PlannedNodeClaim:
    reqs = plan.requirements
    if spot_only:
        reqs = reqs.add(requirements.Requirement.in_(labels.LABEL_CAPACITY_TYPE, [labels.CAPACITY_TYPE_SPOT]))
    return dataclasses.replace(plan, instance_type_options=tuple(options), requirements=reqs)


def _spot_to_spot(
    plan: results.PlannedNodeClaim, total: float, *, single: bool
) -> results.PlannedNodeClaim | blockers.Blocker:
    spot_plan = _with_options(plan, plan.instance_type_options, spot_only=True)
    options = sorted(
        filter_by_price(spot_plan.instance_type_options, spot_plan.requirements, total),
        key=lambda t: min(o.price for o in compatible_offerings(t, spot_plan.requirements)),
    )
    if not options:
        return blockers.Blocker(blockers.Kind.NOT_CHEAPER, "Can't replace spot node with a cheaper spot node")
    if single:
        if len(options) < MIN_SPOT_TO_SPOT_TYPES:
            return blockers.Blocker(
                blockers.Kind.SPOT_TO_SPOT,
                f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance type options than the "
                f"current candidate to consolidate, got {len(options)}",
            )
        # upstream keeps the 15 cheapest, or as many as minValues needs (disruption/consolidation.go)
        options = options[: max(MIN_SPOT_TO_SPOT_TYPES, types.min_values_needed(options, plan.requirements) or 0)]
    if not types.satisfies_min_values(options, plan.requirements):
        return blockers.Blocker(
            blockers.Kind.MIN_VALUES, "minValues requirement is not met by the cheaper spot instance types"
        )
    return _with_options(plan, options, spot_only=True)


def compute(
    chosen: Sequence[disruption_candidates.Candidate],
    simulate: Callable[[Sequence[disruption_candidates.Candidate]], simulation.Simulation],
    *,
    method: str,
    spot_to_spot: bool = False,
    single: bool = True,
) -> Command | blockers.Blocker:
    """A delete/replace command for removing `chosen` together, or why that does not pay off or fit."""
    sim = simulate(chosen)
    if not sim.all_scheduled:
        return pods_do_not_fit(sim)
    reason = nodepool.DisruptionReason.UNDERUTILIZED
    if not sim.replacements:
        return Command(method, reason, tuple(chosen))
    if len(sim.replacements) > 1:
        return blockers.Blocker(
            blockers.Kind.REPLACEMENTS, f"Can't remove without creating {len(sim.replacements)} candidates"
        )
    plan = sim.replacements[0]
    total = sum(c.price for c in chosen)
    ct_req = plan.requirements.get(labels.LABEL_CAPACITY_TYPE)
    could_be_spot = ct_req is None or ct_req.has(labels.CAPACITY_TYPE_SPOT)
    if all(c.capacity_type == labels.CAPACITY_TYPE_SPOT for c in chosen) and could_be_spot:
        if not spot_to_spot:
            return blockers.Blocker(
                blockers.Kind.SPOT_TO_SPOT,
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
            )
        spot = _spot_to_spot(plan, total, single=single)
        if not single and not isinstance(spot, blockers.Blocker):
            spot = _without_same_type(spot, chosen)
        return spot if isinstance(spot, blockers.Blocker) else Command(method, reason, tuple(chosen), (spot,))
    options = filter_by_price(plan.instance_type_options, plan.requirements, total)
    if (why := _none_cheaper(options, plan.requirements)) is not None:
        return why
    either = ct_req is None or (ct_req.has(labels.CAPACITY_TYPE_SPOT) and ct_req.has(labels.CAPACITY_TYPE_ON_DEMAND))
    offered = (o for t in options for o in compatible_offerings(t, plan.requirements))
    spot_offered = any(o.capacity_type == labels.CAPACITY_TYPE_SPOT for o in offered)
    pinned = _with_options(plan, options, spot_only=either and spot_offered)
    # multi-node: after the price filter and the spot pin, as upstream's multi-node consolidation applies it
    replacement = pinned if single else _without_same_type(pinned, chosen)
    if isinstance(replacement, blockers.Blocker):
        return replacement
    return Command(method, reason, tuple(chosen), (replacement,))


@dataclass(frozen=True, slots=True)
class BalancedScore:
    """One Balanced pool's view of a move: its share of the pool's cost saved over its share of the pool's
    disruption, approved at 1/K or more (core: disruption/types.go `ScoreResult`)."""

    savings_fraction: float
    disruption_fraction: float
    k: int = BALANCED_K

    @property
    def score(self) -> float:
        if self.savings_fraction <= 0:
            return 0.0
        return math.inf if self.disruption_fraction <= 0 else self.savings_fraction / self.disruption_fraction

    @property
    def threshold(self) -> float:
        return 1.0 / self.k

    @property
    def approved(self) -> bool:
        return self.score >= self.threshold


def balanced_score(
    *, savings: float, disruption: float, pool_cost: float, pool_disruption: float, k: int = BALANCED_K
) -> BalancedScore:
    """(savings / pool cost) / (disruption / pool disruption), against 1/K (core: disruption/balanced.go
    `ScoreMove`); nothing saved or no pool cost scores 0, no disruption scores infinity."""
    savings_fraction = savings / pool_cost if pool_cost > 0 else 0.0
    disrupts = disruption > 0 and pool_disruption > 0
    return BalancedScore(savings_fraction, disruption / pool_disruption if disrupts else 0.0, k)


def balanced_ok(
    *, savings: float, disruption: float, pool_cost: float, pool_disruption: float, k: int = BALANCED_K
) -> bool:
    """(savings / pool cost) / (disruption / pool disruption) ≥ 1/K (core: disruption/balanced.go)."""
    return balanced_score(
        savings=savings, disruption=disruption, pool_cost=pool_cost, pool_disruption=pool_disruption, k=k
    ).approved


def balanced_scores(
    command: Command, pool_members: Sequence[disruption_candidates.Candidate]
) -> dict[str, BalancedScore]:
    """The score of each Balanced pool touched by `command`, its share of the savings split by price (core:
    disruption/balanced.go `EvaluateBalancedMove`); pools of other policies are not scored."""
    total_price = sum(c.price for c in command.candidates) or 1.0
    scores = {}
    for pool_name in dict.fromkeys(c.pool.name for c in command.candidates):
        moved = [c for c in command.candidates if c.pool.name == pool_name]
        if moved[0].pool.disruption.consolidation_policy != nodepool.ConsolidationPolicy.BALANCED:
            continue
        members = [c for c in pool_members if c.pool.name == pool_name]
        share = sum(c.price for c in moved) / total_price
        scores[pool_name] = balanced_score(
            savings=command.savings * share,
            disruption=sum(c.reschedule_cost for c in moved),
            pool_cost=sum(c.price for c in members),
            pool_disruption=sum(c.reschedule_cost for c in members),
        )
    return scores


def balanced_allows(command: Command, pool_members: Sequence[disruption_candidates.Candidate]) -> bool:
    """Every Balanced pool touched by `command` must approve its share of the move (savings split by price)."""
    return all(score.approved for score in balanced_scores(command, pool_members).values())


@dataclass(frozen=True, slots=True)
class Scored:
    """A consolidation move as the Balanced policy judged it: the score of each Balanced pool it touches."""

    command: Command
    scores: Mapping[str, BalancedScore]

    @property
    def approved(self) -> bool:
        return all(score.approved for score in self.scores.values())


def pods_do_not_fit(sim: simulation.Simulation) -> blockers.Blocker:
    """The first pod (by name) that would fit nowhere, and why."""
    key, why = next(iter(sorted(sim.unschedulable.items())))
    return blockers.Blocker(blockers.Kind.PODS_DO_NOT_FIT, f"Not all pods would schedule, {key} => {why}")


def consolidatable_blocker(candidate: disruption_candidates.Candidate, *, now: float) -> blockers.Blocker | None:
    """Why no consolidation (emptiness included) may act on `candidate` yet: consolidateAfter is Never, or the
    claim's Consolidatable condition is not True (the message says how long ago its pods changed)."""
    if candidate.pool.disruption.consolidate_after is None:
        return blockers.consolidation_disabled(candidate.pool.name)
    if not candidate.claim.is_true(nodeclaim.CONSOLIDATABLE):
        verdict = disruption_conditions.consolidatable(candidate.claim, candidate.pool, now=now)
        return blockers.consolidate_after(verdict.reason or "its Consolidatable condition is not set yet")
    return None


def eligible(candidate: disruption_candidates.Candidate, *, now: float) -> blockers.Blocker | None:
    """Why consolidation skips `candidate` (None when it may be consolidated)."""
    if candidate.pool.disruption.consolidate_after is None:
        return blockers.consolidation_disabled(candidate.pool.name)
    if candidate.pool.disruption.consolidation_policy == nodepool.ConsolidationPolicy.WHEN_EMPTY:
        return blockers.when_empty(candidate.pool.name)
    return consolidatable_blocker(candidate, now=now)
