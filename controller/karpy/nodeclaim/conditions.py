"""Status-condition bookkeeping shared by the NodeClaim and termination reconcilers (pure).

Like upstream's operatorpkg `StatusConditions`, `lastTransitionTime` moves only when `status` changes: a new
reason or message on an unchanged status keeps the old time. The liveness timeouts and the minimum drain time are
measured from these times, so they must not reset on every reconcile.
"""

from __future__ import annotations

from karpy.api import meta

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"


def set_condition(
    conditions: tuple[meta.Condition, ...],
    type_: str,
    status: str,
    *,
    now: float,
    reason: str = "",
    message: str = "",
    observed_generation: int = 0,
) -> tuple[meta.Condition, ...]:
    """`conditions` with `type_` set; its transition time is `now` only when the status changes (or it is new).
    `observed_generation`: the object's generation the condition describes (0: not recorded)."""
    if status not in (TRUE, FALSE, UNKNOWN):
        raise ValueError(f"condition {type_}: status must be True, False or Unknown, not {status!r}")
    reason = reason or (type_ if status == TRUE else "")
    old = meta.condition(conditions, type_)
    when = old.last_transition_time if old is not None and old.status == status else now
    new = meta.Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=when,
        observed_generation=observed_generation,
    )
    if old is None:
        return (*conditions, new)
    return tuple(new if c.type == type_ else c for c in conditions)


def ensure_unknown(conditions: tuple[meta.Condition, ...], *types: str, now: float) -> tuple[meta.Condition, ...]:
    """Add each missing condition as Unknown (upstream initialises the lifecycle conditions this way)."""
    out = conditions
    for type_ in types:
        if meta.condition(out, type_) is None:
            out = set_condition(out, type_, UNKNOWN, now=now, reason="AwaitingReconciliation")
    return out


def is_true(conditions: tuple[meta.Condition, ...], type_: str) -> bool:
    found = meta.condition(conditions, type_)
    return found is not None and found.is_true


def since(conditions: tuple[meta.Condition, ...], type_: str) -> float | None:
    """When the condition last changed status, or None when absent."""
    found = meta.condition(conditions, type_)
    return None if found is None else found.last_transition_time
