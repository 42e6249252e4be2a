"""Disruption budget evaluation (core: pkg/apis/v1/nodepool.go `MustGetAllowedDisruptions`,
`GetAllowedDisruptionsByReason`, `Budget.IsActive`, `Budget.GetAllowedDisruptions`). Pure: the caller passes `now`
(epoch seconds) from its injected clock.

The disruption controller subtracts nodes already being disrupted from `allowed_disruptions`; that bookkeeping
(core: disruption/helpers.go `BuildDisruptionBudgetMapping`) is not done here.
"""

from __future__ import annotations

from typing import Final

from karpy.api import cron, nodepool

# Upstream's "no limit" (math.MaxInt32): what an inactive budget allows, and the result with no active budget.
UNLIMITED: Final = 2**31 - 1


def budget_is_active(budget: nodepool.Budget, now: float) -> bool:
    """A budget without schedule/duration is always active; otherwise it is active iff the schedule's next hit
    after `now - duration` is not after `now`. Raises cron.CronError when the schedule is missing or invalid.

    Like upstream, a schedule that never fires (robfig returns the zero time, which is not after now, e.g.
    "0 0 30 2 *") makes the budget permanently active."""
    if budget.schedule is None and budget.duration is None:
        return True
    if budget.schedule is None:
        raise cron.CronError("duration is set without a schedule")
    next_hit = cron.parse(budget.schedule).next_time(now - (budget.duration or 0.0))
    return next_hit is None or next_hit <= now


def _scaled(budget: nodepool.Budget, num_nodes: int, now: float) -> int | None:
    """Disruptions this one budget allows, or None when it is misconfigured (a bad schedule or `nodes` value)."""
    try:
        active = budget_is_active(budget, now)
    except cron.CronError:
        return None
    if not active:
        return UNLIMITED
    nodes = budget.nodes.strip()
    try:
        if nodes.endswith("%"):
            return -(-int(nodes[:-1]) * num_nodes // 100)
        return int(nodes)
    except ValueError:
        return None


def budget_allowed(budget: nodepool.Budget, num_nodes: int, now: float) -> int:
    """Disruptions this one budget allows: UNLIMITED when inactive, 0 when misconfigured (fail closed), else the
    integer or ceil(percent × num_nodes / 100), like intstr.GetScaledValueFromIntOrPercent(roundUp=true)."""
    value = _scaled(budget, num_nodes, now)
    return 0 if value is None else value


def allowed_disruptions(pool: nodepool.NodePool, reason: nodepool.DisruptionReason, num_nodes: int, now: float) -> int:
    """The minimum over the budgets that apply to `reason` (reasons unset, or listing it); UNLIMITED if none do.

    Any misconfigured budget, whatever reasons it lists, makes it 0 for every reason: upstream evaluates every
    budget and `MustGetAllowedDisruptions` fails closed on any error."""
    allowed = UNLIMITED
    for budget in pool.disruption.budgets:
        value = _scaled(budget, num_nodes, now)
        if value is None:
            return 0
        if budget.reasons is None or reason in budget.reasons:
            allowed = min(allowed, value)
    return allowed
