"""What the NodePool and EC2NodeClass status controllers write (pure; upstream nodepool/readiness, validation,
counter and hash controllers, aws nodeclass hash controller).

NodePool conditions: ValidationSucceeded (False with the parser's problems for an object the CRD schema let through,
e.g. stored under an older CRD), NodeClassReady (its EC2NodeClass exists and is Ready), and the root Ready (all of
them True); NodeRegistrationHealthy, decided by `karpy.nodeclaim.registration`, is written here too but is no
dependent of Ready (upstream's NodePool status conditions). Status also carries the pool's usage (`resources`,
`nodes`). Hash annotations mark which template the pool's NodeClaims were built from (drift). Everything here
returns patches; the async shell only applies them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

from karpy.api import decoding, ec2nodeclass, meta, nodepool, quantity, status
from karpy.nodeclaim import conditions as nodeclaim_conditions

VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
NODECLASS_READY: Final = "NodeClassReady"
READY: Final = "Ready"
NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"
NODES: Final = "nodes"
"""The pseudo-resource the state cache counts nodes under (milli-units, like NodePool limits)."""


class Reason(enum.StrEnum):
    VALIDATION_FAILED = "NodePoolValidationFailed"
    NODECLASS_NOT_FOUND = "NodeClassNotFound"
    NODECLASS_NOT_READY = "NodeClassNotReady"
    UNHEALTHY_DEPENDENTS = "UnhealthyDependents"


def observed_conditions(raw: Mapping[str, Any]) -> tuple[meta.Condition, ...]:
    """The conditions currently stored on a raw object (tolerant: an invalid object still has a status)."""
    items = (raw.get("status") or {}).get("conditions") or []
    try:
        return decoding.conditions([c for c in items if isinstance(c, Mapping)])
    except (ValueError, TypeError, KeyError):
        return ()


def nodeclass_condition(
    pool: nodepool.NodePool | None, nodeclasses: Mapping[str, ec2nodeclass.EC2NodeClass]
) -> tuple[str, str, str]:
    """(status, reason, message) of NodeClassReady."""
    if pool is None:
        return nodeclaim_conditions.UNKNOWN, "AwaitingReconciliation", "the NodePool does not validate"
    ref = pool.template.node_class_ref
    nc = nodeclasses.get(ref.name)
    if nc is None:
        return (
            nodeclaim_conditions.FALSE,
            Reason.NODECLASS_NOT_FOUND,
            f"{ref.kind or 'EC2NodeClass'} {ref.name!r} not found",
        )
    ready = meta.condition(nc.status.conditions, ec2nodeclass.READY)
    if ready is None:
        return (
            nodeclaim_conditions.UNKNOWN,
            "AwaitingReconciliation",
            f"EC2NodeClass {ref.name!r} has no Ready condition yet",
        )
    if not ready.is_true:
        return (
            nodeclaim_conditions.FALSE,
            Reason.NODECLASS_NOT_READY,
            ready.message or f"EC2NodeClass {ref.name!r} is not ready",
        )
    return nodeclaim_conditions.TRUE, NODECLASS_READY, ""


def nodepool_conditions(
    previous: tuple[meta.Condition, ...],
    *,
    pool: nodepool.NodePool | None,
    validation_error: str,
    nodeclasses: Mapping[str, ec2nodeclass.EC2NodeClass],
    now: float,
    registration: tuple[str, str, str] | None = None,
    generation: int = 0,
) -> tuple[meta.Condition, ...]:
    """`registration`: NodeRegistrationHealthy's (status, reason, message), recorded against `generation`; None
    leaves it as it is."""
    out = previous
    if registration is not None:
        r_status, r_reason, r_message = registration
        out = nodeclaim_conditions.set_condition(
            out,
            NODE_REGISTRATION_HEALTHY,
            r_status,
            now=now,
            reason=r_reason,
            message=r_message,
            observed_generation=generation,
        )
    if validation_error:
        out = nodeclaim_conditions.set_condition(
            out,
            VALIDATION_SUCCEEDED,
            nodeclaim_conditions.FALSE,
            now=now,
            reason=Reason.VALIDATION_FAILED,
            message=validation_error,
        )
    else:
        out = nodeclaim_conditions.set_condition(out, VALIDATION_SUCCEEDED, nodeclaim_conditions.TRUE, now=now)
    nc_status, nc_reason, nc_message = nodeclass_condition(pool, nodeclasses)
    out = nodeclaim_conditions.set_condition(
        out, NODECLASS_READY, nc_status, now=now, reason=nc_reason, message=nc_message
    )
    unhealthy = [c.type for c in out if c.type in (VALIDATION_SUCCEEDED, NODECLASS_READY) and not c.is_true]
    if unhealthy:
        message = "; ".join(f"{t}={meta.condition(out, t).status}" for t in unhealthy)  # type: ignore[union-attr]
        out = nodeclaim_conditions.set_condition(
            out, READY, nodeclaim_conditions.FALSE, now=now, reason=Reason.UNHEALTHY_DEPENDENTS, message=message
        )
    else:
        out = nodeclaim_conditions.set_condition(out, READY, nodeclaim_conditions.TRUE, now=now)
    return out


def nodepool_status_patch(
    raw: Mapping[str, Any],
    *,
    pool: nodepool.NodePool | None,
    validation_error: str,
    nodeclasses: Mapping[str, ec2nodeclass.EC2NodeClass],
    usage: Mapping[str, int],
    now: float,
    registration: tuple[str, str, str] | None = None,
) -> dict[str, Any] | None:
    """The status-subresource merge patch for one NodePool, or None when nothing would change."""
    conditions = nodepool_conditions(
        observed_conditions(raw),
        pool=pool,
        validation_error=validation_error,
        nodeclasses=nodeclasses,
        now=now,
        registration=registration,
        generation=pool.metadata.generation if pool is not None else 0,
    )
    body: dict[str, Any] = {
        "conditions": status.conditions(conditions),
        "resources": {k: quantity.format_resource(k, v) for k, v in sorted(usage.items()) if k != NODES},
        "nodes": usage.get(NODES, 0) // 1000,
    }
    if pool is not None:
        nc = nodeclasses.get(pool.template.node_class_ref.name)
        if nc is not None and nc.metadata.generation:
            body["nodeClassObservedGeneration"] = nc.metadata.generation
    current = raw.get("status") or {}
    if all(_same(current.get(key), value) for key, value in body.items()):
        return None
    return {"status": body}


def same_conditions(current: Any, wanted: list[dict[str, Any]]) -> bool:
    """Whether stored conditions already hold the wanted ones (the fields karpy writes, in any order)."""
    return _same(current, wanted)


def _same(current: Any, wanted: Any) -> bool:
    if isinstance(wanted, list) and isinstance(current, list):  # conditions: the fields we set, in any order
        return sorted(_cond_key(c) for c in current if isinstance(c, Mapping)) == sorted(map(_cond_key, wanted))
    return bool(current == wanted)


def _cond_key(c: Mapping[str, Any]) -> tuple[str, str, str, str, str, int]:
    return (
        str(c.get("type")),
        str(c.get("status")),
        str(c.get("reason") or ""),
        str(c.get("message") or ""),
        str(c.get("lastTransitionTime") or ""),
        int(c.get("observedGeneration") or 0),
    )
