"""Churn protection (core: disruption/validation.go): a command is re-checked against a fresh snapshot before it acts.

Emptiness and consolidation wait `VALIDATION_DELAY` on the clock first, so pods that were about to land on the
candidates get the chance to. An emptiness command goes on with those of its nodes that are still empty candidates
within the budgets (it fails only when none is left). Any other command stands only if every candidate is still a
candidate (not nominated, no new blocker), the budgets still allow it, and a consolidation re-simulated now has the
same shape: delete stays delete, and every instance type the replacement would launch still fits.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from karpy import clock as karpy_clock
from karpy.api import nodepool
from karpy.disruption import consolidation, methods, simulation

VALIDATION_DELAY = 15.0
"""Seconds between deciding and re-checking a consolidation (upstream commandValidationDelay)."""

Reason = nodepool.DisruptionReason


class Failure(enum.StrEnum):
    """Why a command failed its re-check, as upstream classifies it (core: disruption/validation.go
    `getValidationFailureReason`, the reason of ConsolidationRejected events)."""

    CHURN = "churn"
    BUDGET = "budget"
    SCHEDULING = "scheduling"


@dataclass(frozen=True, slots=True)
class Invalid:
    failure: Failure
    message: str

    def __str__(self) -> str:
        return self.message


def needs_delay(command: consolidation.Command) -> bool:
    return command.reason in (Reason.EMPTY, Reason.UNDERUTILIZED)


def validate(command: consolidation.Command, fresh: methods.Context) -> consolidation.Command | Invalid:
    """The command to act on when `command` still holds in `fresh`, else why not. An emptiness command keeps the
    candidates still empty that the budgets still allow, and fails only when none is left (upstream's
    EmptinessValidator); the others stand or fall whole."""
    if command.reason == Reason.EMPTY:
        return _still_empty(command, fresh)
    pool = fresh.eventual if command.reason == Reason.DRIFTED else fresh.graceful
    by_name = {c.name: c for c in pool}
    current = []
    for old in command.candidates:
        now = by_name.get(old.name)
        if now is None:
            return Invalid(Failure.CHURN, f"{old.name} is no longer a disruption candidate")
        current.append(now)
    budget = fresh.budgets.get(command.reason, {})
    per_pool = collections.Counter(c.pool.name for c in current)
    for pool_name, count in per_pool.items():
        if budget.get(pool_name, 0) < count:
            return Invalid(
                Failure.BUDGET, f"the disruption budget of nodepool {pool_name} no longer allows {count} node(s)"
            )
    if command.reason != Reason.UNDERUTILIZED:
        return command
    return _same_shape(command, fresh.simulate(current))


def _same_shape(command: consolidation.Command, sim: simulation.Simulation) -> consolidation.Command | Invalid:
    """core: disruption/validation.go `validateCommand`: the re-simulation must place every pod and need what the
    command launches: no replacement for a delete, exactly one for a replace, whose instance types include every
    type the command would launch. The re-simulation's types are not filtered by price, so a replacement that now
    needs bigger nodes loses the command's cheap types and fails, while one that now fits more types still holds
    (consolidation_test.go "should not consolidate if the action picks different instance types after the node
    TTL wait")."""
    if not sim.all_scheduled:
        return Invalid(Failure.SCHEDULING, f"consolidation no longer possible: {consolidation.pods_do_not_fit(sim)}")
    if len(sim.replacements) != len(command.replacements):
        return Invalid(
            Failure.SCHEDULING,
            f"the re-simulation needs {len(sim.replacements)} replacement(s), the command {len(command.replacements)}",
        )
    if command.replacements:
        chosen = {t.name for t in command.replacements[0].instance_type_options}
        fitting = {t.name for t in sim.replacements[0].instance_type_options}
        if not chosen <= fitting:
            return Invalid(Failure.SCHEDULING, "the replacement would now need different instance types")
    return command


def _still_empty(command: consolidation.Command, fresh: methods.Context) -> consolidation.Command | Invalid:
    """core: disruption/validation.go `EmptinessValidator.validateCandidates`: the candidates that are still empty
    disruption candidates, then those of them the budgets allow, in order; a node that gained a pod meanwhile is
    left out rather than holding up the empty ones (consolidation_test.go "does not delete nodes with pod churn,
    deletes nodes without pod churn")."""
    ready = {c.name: c for c in methods.Emptiness().ready(fresh)}
    current = [ready[c.name] for c in command.candidates if c.name in ready]
    if not current:
        gone = ", ".join(c.name for c in command.candidates)
        return Invalid(Failure.CHURN, f"{gone} no longer empty disruption candidate(s)")
    allowed, _ = methods.split_by_budget(current, fresh.budgets.get(command.reason, {}))
    if not allowed:
        pools = ", ".join(dict.fromkeys(c.pool.name for c in current))
        return Invalid(Failure.BUDGET, f"the disruption budget of nodepool(s) {pools} no longer allows their nodes")
    return dataclasses.replace(command, candidates=tuple(allowed))


async def validate_later(
    command: consolidation.Command,
    *,
    clock: karpy_clock.Clock,
    rebuild: Callable[[], Awaitable[methods.Context]],
    delay: float = VALIDATION_DELAY,
) -> tuple[consolidation.Command | Invalid, methods.Context]:
    """Wait `delay` (only for the methods that need it), take a fresh context, and validate: (the command to act on,
    else why not; the fresh context, on which the methods after a rejected command's are asked)."""
    if needs_delay(command):
        await clock.sleep(delay)
    fresh = await rebuild()
    return validate(command, fresh), fresh
