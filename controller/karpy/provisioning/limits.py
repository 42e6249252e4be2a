"""NodePool limits, re-checked right before each NodeClaim is created (pure).

The scheduler already kept each pool's new capacity inside its limits, but against a snapshot: NodeClaims created
since (by another batch, or by disruption replacements) are only visible in the cluster state now. Upstream
(provisioner.Create) refuses to create when the pool's current usage already exceeds a limit (`Limits.ExceededBy`:
strictly greater), which is eventually consistent and can overrun a little; we do the same, and also count the
NodeClaims this batch created a moment ago (not yet in the state cache) at the scheduler's own estimate: the
largest capacity among their instance-type options, and one node each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpy.api import labels, nodepool, quantity
from karpy.scheduling import results

NODE = 1000
"""One node in the `nodes` pseudo-resource (milli-units like every amount)."""


def claim_estimate(plan: results.PlannedNodeClaim) -> dict[str, int]:
    """What a planned NodeClaim may add to its pool's usage: per resource the largest capacity of any option."""
    out: dict[str, int] = {labels.RESOURCE_NODES: NODE}
    for option in plan.instance_type_options:
        for name, amount in option.capacity.items():
            out[name] = max(out.get(name, 0), amount)
    return out


def add_usage(*usages: Mapping[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in usages:
        for name, amount in usage.items():
            total[name] = total.get(name, 0) + amount
    return total


def exceeded(limits: Mapping[str, int], usage: Mapping[str, int]) -> str | None:
    """None when every limited resource is within its limit, else why not (core: Limits.ExceededBy)."""
    for name in sorted(limits):
        used = usage.get(name, 0)
        if used > limits[name]:
            return (
                f"{name} resource usage of {quantity.format_resource(name, used)} exceeds limit of "
                f"{quantity.format_resource(name, limits[name])}"
            )
    return None


def check_before_create(
    limits: Mapping[str, int], usage: Mapping[str, int], *, created_in_batch: Iterable[results.PlannedNodeClaim] = ()
) -> str | None:
    """Whether one more NodeClaim may be created for a pool with `limits`, current state `usage`, and the
    NodeClaims of this pool the batch already created."""
    if not limits:
        return None
    return exceeded(limits, add_usage(usage, *(claim_estimate(p) for p in created_in_batch)))


@dataclass(frozen=True, slots=True)
class Refused:
    plan: results.PlannedNodeClaim
    reason: str
    limited: bool
    """Refused by the pool's limits (else the pool is gone)."""


def admit(
    plans: Sequence[results.PlannedNodeClaim],
    pools: Mapping[str, nodepool.NodePool],
    usage: Callable[[str], Mapping[str, int]],
) -> tuple[list[tuple[results.PlannedNodeClaim, nodepool.NodePool]], list[Refused]]:
    """The planned NodeClaims that may be created, in order, each decision counting the ones admitted before it
    (`check_before_create`), and the refused ones with why (what their pods' FailedScheduling events say)."""
    admitted: dict[str, list[results.PlannedNodeClaim]] = {}
    out: list[tuple[results.PlannedNodeClaim, nodepool.NodePool]] = []
    refused: list[Refused] = []
    for plan in plans:
        pool = pools.get(plan.nodepool)
        if pool is None:
            refused.append(Refused(plan, f"nodepool {plan.nodepool} no longer exists", limited=False))
            continue
        why = check_before_create(pool.limits, usage(pool.name), created_in_batch=admitted.get(pool.name, ()))
        if why is not None:
            refused.append(Refused(plan, f"nodepool {pool.name} limits exceeded: {why}", limited=True))
            continue
        admitted.setdefault(pool.name, []).append(plan)
        out.append((plan, pool))
    return out, refused
