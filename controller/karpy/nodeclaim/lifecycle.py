"""Pure steps of the NodeClaim lifecycle (core: pkg/controllers/nodeclaim/lifecycle/*.go).

Each step takes the parsed NodeClaim (and the raw Node dict where one is involved) and returns the next desired
state: a new `NodeClaim` value and, for the Node, a JSON merge patch. The async controller only fetches, calls
these, and writes. Nothing here reads a clock: `now` is passed in.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Final

from karpy.api import decoding, labels, meta, nodeclaim, quantity
from karpy.nodeclaim import conditions

LAUNCH_TIMEOUT: Final = 5 * 60.0
"""Launched must turn True within this many seconds (upstream liveness.go `LaunchTimeout`)."""
REGISTRATION_TIMEOUT: Final = 15 * 60.0
"""Registered must turn True within this many seconds (upstream liveness.go `registrationTimeout`)."""

LIFECYCLE_CONDITIONS: Final = (nodeclaim.LAUNCHED, nodeclaim.REGISTERED, nodeclaim.INITIALIZED)

UNREGISTERED_TAINT_NOT_FOUND: Final = "UnregisteredTaintNotFound"
"""The Registered=False reason of a Node that joined without the `karpenter.sh/unregistered` taint."""


class LivenessReason(enum.StrEnum):
    """Why liveness deletes a NodeClaim (upstream's metric reason labels)."""

    LAUNCH_TIMEOUT = "launch_timeout"
    REGISTRATION_TIMEOUT = "registration_timeout"


@dataclasses.dataclass(frozen=True, slots=True)
class Registration:
    """The outcome of registering a NodeClaim against its Node.

    `node_patch` is None when the Node already carries everything (a re-run after a crash), `claim` is the
    NodeClaim with its new status, and `error` is set when an invariant is violated (nothing is then written to
    the Node).
    """

    node_patch: Mapping[str, Any] | None
    claim: nodeclaim.NodeClaim
    error: str = ""


def with_status(claim: nodeclaim.NodeClaim, **changes: Any) -> nodeclaim.NodeClaim:
    return dataclasses.replace(claim, status=dataclasses.replace(claim.status, **changes))


def with_condition(
    claim: nodeclaim.NodeClaim, type_: str, status: str, *, now: float, reason: str = "", message: str = ""
) -> nodeclaim.NodeClaim:
    updated = conditions.set_condition(claim.status.conditions, type_, status, now=now, reason=reason, message=message)
    return with_status(claim, conditions=updated)


def ready_condition(claim: nodeclaim.NodeClaim) -> tuple[str, str, str]:
    """(status, reason, message) of the root Ready condition, as operatorpkg derives a root from its dependents
    (Launched, Registered, Initialized): the most recently changed False one, else the most recently changed
    Unknown one, else Unknown while one is missing, else True."""
    found = [claim.condition(t) for t in LIFECYCLE_CONDITIONS]
    present = sorted((c for c in found if c is not None), key=lambda c: c.last_transition_time or 0.0, reverse=True)
    for wanted in (conditions.FALSE, conditions.UNKNOWN):
        for c in present:
            if c.status == wanted:
                return c.status, c.reason, c.message
    if len(present) < len(LIFECYCLE_CONDITIONS):
        return conditions.UNKNOWN, "AwaitingReconciliation", ""
    return conditions.TRUE, nodeclaim.READY, ""


def with_ready(claim: nodeclaim.NodeClaim, *, now: float) -> nodeclaim.NodeClaim:
    """`claim` with its Ready condition recomputed from the lifecycle conditions."""
    status_, reason, message = ready_condition(claim)
    return with_condition(claim, nodeclaim.READY, status_, now=now, reason=reason, message=message)


def initial_conditions(claim: nodeclaim.NodeClaim, *, now: float) -> nodeclaim.NodeClaim:
    """Launched/Registered/Initialized as Unknown when missing: their transition times start the liveness clocks."""
    return with_status(
        claim, conditions=conditions.ensure_unknown(claim.status.conditions, *LIFECYCLE_CONDITIONS, now=now)
    )


# --- launch -----------------------------------------------------------------------------------------------------


def launch_result(claim: nodeclaim.NodeClaim, resolved: nodeclaim.NodeClaim, *, now: float) -> nodeclaim.NodeClaim:
    """The NodeClaim after `cloud.create` returned `resolved`: provider id, image, capacity, allocatable, the
    instance's labels (instance type, zone, capacity type, ...) and Launched=True."""
    launched = dataclasses.replace(
        claim,
        metadata=dataclasses.replace(claim.metadata, labels={**claim.metadata.labels, **resolved.metadata.labels}),
    )
    launched = with_status(
        launched,
        provider_id=resolved.status.provider_id,
        image_id=resolved.status.image_id,
        capacity=dict(resolved.status.capacity),
        allocatable=dict(resolved.status.allocatable),
    )
    return with_condition(launched, nodeclaim.LAUNCHED, conditions.TRUE, now=now)


def launch_failed(claim: nodeclaim.NodeClaim, reason: str, message: str, *, now: float) -> nodeclaim.NodeClaim:
    """Launched=False with the provider's stable reason; liveness deletes the claim if it stays so for 5 min."""
    return with_condition(claim, nodeclaim.LAUNCHED, conditions.FALSE, now=now, reason=reason, message=message)


def missing_labels(claim: nodeclaim.NodeClaim, resolved_labels: Mapping[str, str]) -> dict[str, str]:
    """Labels of the launched instance that the claim lacks or has differently (a crash between the status write
    and the label write leaves the claim Launched but unlabelled; the next reconcile re-derives them)."""
    return {k: v for k, v in resolved_labels.items() if claim.metadata.labels.get(k) != v}


def labels_patch(new_labels: Mapping[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(new_labels)}}


# --- registration -----------------------------------------------------------------------------------------------


def _taint(raw: Mapping[str, Any]) -> meta.Taint:
    return meta.Taint(key=str(raw.get("key", "")), effect=str(raw.get("effect", "")), value=str(raw.get("value", "")))


def node_taints(node: Mapping[str, Any]) -> tuple[meta.Taint, ...]:
    return tuple(_taint(t) for t in (node.get("spec") or {}).get("taints") or ())


def _taint_body(taint: meta.Taint) -> dict[str, str]:
    body = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        body["value"] = taint.value
    return body


def _matches(a: meta.Taint, b: meta.Taint) -> bool:
    """corev1 `MatchTaint`: same key and effect (the value does not matter)."""
    return a.key == b.key and a.effect == b.effect


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def owner_reference(claim: nodeclaim.NodeClaim) -> dict[str, Any]:
    return {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodeClaim",
        "name": claim.name,
        "uid": claim.metadata.uid,
        "blockOwnerDeletion": True,
    }


def syncs_taints(claim: nodeclaim.NodeClaim, node: Mapping[str, Any]) -> bool:
    """False when the provider manages taints itself (`karpenter.sh/do-not-sync-taints=true` on claim or node)."""
    node_labels = _metadata(node).get("labels") or {}
    return "true" not in (
        claim.metadata.labels.get(labels.LABEL_DO_NOT_SYNC_TAINTS),
        node_labels.get(labels.LABEL_DO_NOT_SYNC_TAINTS),
    )


def registration_patch(claim: nodeclaim.NodeClaim, node: Mapping[str, Any], *, now: float) -> Registration:
    """Sync the NodeClaim onto its Node and mark it Registered (upstream registration.go).

    The Node gets the claim's labels and annotations, its taints and startup taints merged in (unless taints are
    not synced), the `karpenter.sh/unregistered` taint removed, the termination finalizer, an owner reference to
    the claim and `karpenter.sh/registered=true`. The patch carries the Node's resourceVersion, so a concurrent
    writer makes it fail with 409 instead of being overwritten (merge patches replace whole lists).
    """
    md = _metadata(node)
    node_name = str(md.get("name", ""))
    current_labels: Mapping[str, str] = md.get("labels") or {}
    raw_taints = list((node.get("spec") or {}).get("taints") or ())
    unregistered = meta.Taint(labels.TAINT_UNREGISTERED_KEY, labels.EFFECT_NO_EXECUTE)
    has_unregistered = any(_matches(_taint(t), unregistered) for t in raw_taints)
    if labels.LABEL_REGISTERED not in current_labels and not has_unregistered:
        message = (
            f"Invariant violated, {labels.TAINT_UNREGISTERED_KEY} taint must be present on Karpenter-managed nodes"
        )
        failed = with_condition(
            claim, nodeclaim.REGISTERED, conditions.FALSE, now=now, reason=UNREGISTERED_TAINT_NOT_FOUND, message=message
        )
        return Registration(node_patch=None, claim=failed, error=message)

    taints = list(raw_taints)
    if syncs_taints(claim, node):
        for wanted in (*claim.spec.taints, *claim.spec.startup_taints):
            if not any(_matches(_taint(t), wanted) for t in taints):
                taints.append(_taint_body(wanted))
    taints = [t for t in taints if not _matches(_taint(t), unregistered)]

    new_labels = {**claim.metadata.labels, labels.LABEL_REGISTERED: "true"}
    new_annotations = dict(claim.metadata.annotations)
    finalizers = list(md.get("finalizers") or ())
    owners = [dict(o) for o in md.get("ownerReferences") or ()]
    wanted_owner = owner_reference(claim)
    if not any(o.get("uid") == claim.metadata.uid and o.get("kind") == "NodeClaim" for o in owners):
        owners.append(wanted_owner)

    patch_meta: dict[str, Any] = {}
    changed_labels = {k: v for k, v in new_labels.items() if current_labels.get(k) != v}
    if changed_labels:
        patch_meta["labels"] = changed_labels
    current_annotations: Mapping[str, str] = md.get("annotations") or {}
    changed_annotations = {k: v for k, v in new_annotations.items() if current_annotations.get(k) != v}
    if changed_annotations:
        patch_meta["annotations"] = changed_annotations
    if labels.FINALIZER_TERMINATION not in finalizers:
        patch_meta["finalizers"] = [*finalizers, labels.FINALIZER_TERMINATION]
    if owners != list(md.get("ownerReferences") or ()):
        patch_meta["ownerReferences"] = owners
    patch: dict[str, Any] = {}
    if taints != raw_taints:
        patch["spec"] = {"taints": taints}
    if patch_meta or patch:
        if md.get("resourceVersion"):
            patch_meta["resourceVersion"] = md["resourceVersion"]
        patch["metadata"] = patch_meta
    registered = with_status(claim, node_name=node_name)
    registered = with_condition(registered, nodeclaim.REGISTERED, conditions.TRUE, now=now)
    return Registration(node_patch=patch or None, claim=registered)


def node_not_found(claim: nodeclaim.NodeClaim, *, now: float) -> nodeclaim.NodeClaim:
    return with_condition(
        claim,
        nodeclaim.REGISTERED,
        conditions.UNKNOWN,
        now=now,
        reason="NodeNotFound",
        message="Node not registered with cluster",
    )


def multiple_nodes(claim: nodeclaim.NodeClaim, *, now: float) -> nodeclaim.NodeClaim:
    return with_condition(
        claim,
        nodeclaim.REGISTERED,
        conditions.FALSE,
        now=now,
        reason="MultipleNodesFound",
        message="Invariant violated, matched multiple nodes",
    )


# --- initialization ---------------------------------------------------------------------------------------------


def node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def is_ephemeral(taint: meta.Taint) -> bool:
    """Taints the node lifecycle owns and removes by itself (core: pkg/scheduling/taints.go KnownEphemeralTaints)."""
    return (taint.key, taint.effect) in labels.EPHEMERAL_TAINTS or taint.key.startswith(
        labels.EPHEMERAL_TAINT_KEY_PREFIX
    )


def format_taint(taint: meta.Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def initialized(claim: nodeclaim.NodeClaim, node: Mapping[str, Any]) -> tuple[bool, str, str]:
    """Whether the Node is initialized, and if not the (reason, message) upstream reports (initialization.go).

    Ready=True, every startup taint gone, every known ephemeral taint gone, and every resource the claim requested
    present (non-zero) in the Node's allocatable (device plugins register extended resources late).
    """
    if not node_ready(node):
        return False, "NodeNotReady", "Node status is NotReady"
    taints = node_taints(node)
    for startup in claim.spec.startup_taints:
        found = next((t for t in taints if _matches(t, startup)), None)
        if found is not None:
            return False, "StartupTaintsExist", f'StartupTaint "{format_taint(found)}" still exists'
    ephemeral = next((t for t in taints if is_ephemeral(t)), None)
    if ephemeral is not None:
        return False, "KnownEphemeralTaintsExist", f'KnownEphemeralTaint "{format_taint(ephemeral)}" still exists'
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for name, amount in sorted(claim.spec.resources.items()):
        if amount <= 0:
            continue
        raw = allocatable.get(name)
        if raw is None or quantity.parse(str(raw)) <= 0:
            return False, "ResourceNotRegistered", f'Resource "{name}" was requested but not registered'
    return True, "", ""


def initialization_patch(node: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Node label patch that marks it initialized, None when it already has the label."""
    if (_metadata(node).get("labels") or {}).get(labels.LABEL_INITIALIZED) == "true":
        return None
    return {"metadata": {"labels": {labels.LABEL_INITIALIZED: "true"}}}


# --- liveness ---------------------------------------------------------------------------------------------------


def _started(claim: nodeclaim.NodeClaim, type_: str) -> float | None:
    when = conditions.since(claim.status.conditions, type_)
    return when if when is not None else claim.metadata.creation_timestamp


def liveness_deadline(claim: nodeclaim.NodeClaim) -> tuple[float, LivenessReason] | None:
    """When the claim is deleted for not launching / not registering in time; None once Registered."""
    if claim.is_true(nodeclaim.REGISTERED):
        return None
    if not claim.is_true(nodeclaim.LAUNCHED):
        start = _started(claim, nodeclaim.LAUNCHED)
        return None if start is None else (start + LAUNCH_TIMEOUT, LivenessReason.LAUNCH_TIMEOUT)
    start = _started(claim, nodeclaim.REGISTERED)
    return None if start is None else (start + REGISTRATION_TIMEOUT, LivenessReason.REGISTRATION_TIMEOUT)


def liveness(claim: nodeclaim.NodeClaim, now: float) -> LivenessReason | None:
    """Why the claim must be deleted now (launch 5 min / registration 15 min timeouts), or None."""
    deadline = liveness_deadline(claim)
    if deadline is None or now < deadline[0]:
        return None
    return deadline[1]


# --- termination grace period -----------------------------------------------------------------------------------


def termination_timestamp_annotation(claim: nodeclaim.NodeClaim) -> str | None:
    """deletionTimestamp + spec.terminationGracePeriod as RFC 3339, or None (not deleting, or no TGP)."""
    deleted = claim.metadata.deletion_timestamp
    if deleted is None or claim.spec.termination_grace_period is None:
        return None
    return decoding.format_timestamp(deleted + claim.spec.termination_grace_period)


def termination_time(claim: nodeclaim.NodeClaim) -> float | None:
    """The node's forced termination time from the annotation, None when absent or unreadable."""
    return decoding.timestamp_or_none(claim.metadata.annotations.get(labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP))
