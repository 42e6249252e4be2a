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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpy.api import decoding, ec2nodeclass, hashing, labels, meta, nodeclaim, nodepool, quantity, status
from karpy.nodeclaim import conditions as cond

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
        return cond.UNKNOWN, "AwaitingReconciliation", "the NodePool does not validate"
    ref = pool.template.node_class_ref
    nc = nodeclasses.get(ref.name)
    if nc is None:
        return cond.FALSE, Reason.NODECLASS_NOT_FOUND, f"{ref.kind or 'EC2NodeClass'} {ref.name!r} not found"
    ready = meta.condition(nc.status.conditions, ec2nodeclass.READY)
    if ready is None:
        return cond.UNKNOWN, "AwaitingReconciliation", f"EC2NodeClass {ref.name!r} has no Ready condition yet"
    if not ready.is_true:
        return cond.FALSE, Reason.NODECLASS_NOT_READY, ready.message or f"EC2NodeClass {ref.name!r} is not ready"
    return cond.TRUE, NODECLASS_READY, ""


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
        out = cond.set_condition(
            out,
            NODE_REGISTRATION_HEALTHY,
            r_status,
            now=now,
            reason=r_reason,
            message=r_message,
            observed_generation=generation,
        )
    if validation_error:
        out = cond.set_condition(
            out, VALIDATION_SUCCEEDED, cond.FALSE, now=now, reason=Reason.VALIDATION_FAILED, message=validation_error
        )
    else:
        out = cond.set_condition(out, VALIDATION_SUCCEEDED, cond.TRUE, now=now)
    nc_status, nc_reason, nc_message = nodeclass_condition(pool, nodeclasses)
    out = cond.set_condition(out, NODECLASS_READY, nc_status, now=now, reason=nc_reason, message=nc_message)
    unhealthy = [c.type for c in out if c.type in (VALIDATION_SUCCEEDED, NODECLASS_READY) and not c.is_true]
    if unhealthy:
        message = "; ".join(f"{t}={meta.condition(out, t).status}" for t in unhealthy)  # type: ignore[union-attr]
        out = cond.set_condition(out, READY, cond.FALSE, now=now, reason=Reason.UNHEALTHY_DEPENDENTS, message=message)
    else:
        out = cond.set_condition(out, READY, cond.TRUE, now=now)
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


@dataclass(frozen=True, slots=True)
class HashStamp:
    """The drift hash of one owner of NodeClaims (a NodePool or an EC2NodeClass): the annotation keys it is written
    under, karpy's hash version and the owner's hash now."""

    hash_key: str
    version_key: str
    version: str
    value: str

    def annotations(self) -> dict[str, str]:
        return {self.hash_key: self.value, self.version_key: self.version}


def nodepool_stamp(pool: nodepool.NodePool) -> HashStamp:
    return HashStamp(
        labels.ANNOTATION_NODEPOOL_HASH,
        labels.ANNOTATION_NODEPOOL_HASH_VERSION,
        labels.NODEPOOL_HASH_VERSION,
        hashing.nodepool_hash(pool),
    )


def nodeclass_stamp(nc: ec2nodeclass.EC2NodeClass) -> HashStamp:
    return HashStamp(
        labels.ANNOTATION_EC2NODECLASS_HASH,
        labels.ANNOTATION_EC2NODECLASS_HASH_VERSION,
        labels.EC2NODECLASS_HASH_VERSION,
        hashing.ec2nodeclass_hash(nc),
    )


def hash_patch(owner: meta.ObjectMeta, stamp: HashStamp) -> dict[str, Any] | None:
    """The annotations that record the owner's hash (upstream's nodepool and nodeclass hash controllers), or None
    when it carries them already."""
    wanted = stamp.annotations()
    if all(owner.annotations.get(k) == v for k, v in wanted.items()):
        return None
    return {"metadata": {"annotations": wanted}}


def restamp_patch(claim: nodeclaim.NodeClaim, stamp: HashStamp) -> dict[str, Any] | None:
    """The annotations that re-stamp a claim whose hash carries another version (upstream's, after a take-over, or
    an older karpy's), or None when it carries ours.

    A hash of another version cannot be compared with ours, so it says nothing about drift: the claim gets our
    version and the owner's hash now, as upstream's hash controllers do on a version change (core:
    pkg/controllers/nodepool/hash/controller.go updateNodeClaimHash). A claim already Drifted keeps its old hash
    under the new version, so it stays drifted: whether it still is cannot be told across hash versions."""
    if claim.metadata.annotations.get(stamp.version_key) == stamp.version:
        return None
    wanted = {stamp.version_key: stamp.version}
    if claim.condition(nodeclaim.DRIFTED) is None:
        wanted[stamp.hash_key] = stamp.value
    return {"metadata": {"annotations": wanted}}


def finalizers_patch(raw: Mapping[str, Any], *, add: str = "", remove: str = "") -> list[dict[str, Any]] | None:
    """A JSON patch adding/removing one finalizer, guarded by the resourceVersion; None when already so."""
    meta_ = raw.get("metadata") or {}
    current: Sequence[str] = list(meta_.get("finalizers") or [])
    wanted = [f for f in current if f != remove]
    if add and add not in wanted:
        wanted.append(add)
    if wanted == list(current):
        return None
    version = str(meta_.get("resourceVersion") or "")
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []
    return [*guard, {"op": "add", "path": "/metadata/finalizers", "value": wanted}]


def nodeclass_in_use(name: str, pools: Sequence[nodepool.NodePool]) -> list[str]:
    """NodePools still referring to the EC2NodeClass (it waits for them before cleaning up, as upstream)."""
    return sorted(p.name for p in pools if p.template.node_class_ref.name == name)
