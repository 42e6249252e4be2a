"""The NodeClaim disruption conditions, Consolidatable and Drifted (pure; core: pkg/controllers/nodeclaim/disruption).

Consolidatable: the pool allows consolidation (consolidateAfter is not Never), the claim is Initialized, and
`now − (lastPodEventTime or the Initialized transition) ≥ consolidateAfter`. Drifted, checked in upstream's order:
the pool's template hash differs from the claim's (only when both carry the same hash version) → NodePoolDrifted;
the claim's labels no longer satisfy the pool's requirements → RequirementsDrifted; else the provider's reason.
Only Launched claims are checked for drift.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from karpy.api import hashing, labels, meta, nodeclaim, nodepool
from karpy.nodeclaim import conditions
from karpy.scheduling import requirements

DRIFT_REQUEUE = 300.0
"""Seconds between drift checks of a claim (upstream requeues drift every 5 min)."""


class CoreDriftReason(enum.StrEnum):
    """Drift found by core, before asking the cloud provider (core: nodeclaim/disruption/drift.go)."""

    NODEPOOL_DRIFTED = "NodePoolDrifted"
    REQUIREMENTS_DRIFTED = "RequirementsDrifted"


@dataclass(frozen=True, slots=True)
class Consolidatable:
    ready: bool
    wait: float | None  # seconds until it becomes consolidatable; None when time will not change the answer
    reason: str


def consolidatable(claim: nodeclaim.NodeClaim, pool: nodepool.NodePool, *, now: float) -> Consolidatable:
    after = pool.disruption.consolidate_after
    if after is None:
        return Consolidatable(False, None, "consolidateAfter is Never")
    initialized = claim.condition(nodeclaim.INITIALIZED)
    if initialized is None or not initialized.is_true:
        return Consolidatable(False, None, "not initialized")
    since = claim.status.last_pod_event_time or initialized.last_transition_time or 0.0
    remaining = since + after - now
    if remaining > 0:
        return Consolidatable(False, remaining, f"pods changed {now - since:.0f}s ago (consolidateAfter {after:.0f}s)")
    return Consolidatable(True, None, "")


def static_drift(claim: nodeclaim.NodeClaim, pool: nodepool.NodePool) -> CoreDriftReason | None:
    """NodePool template hash drift first, then requirement drift (None when neither)."""
    annotations = claim.metadata.annotations
    claim_hash = annotations.get(labels.ANNOTATION_NODEPOOL_HASH)
    same_version = annotations.get(labels.ANNOTATION_NODEPOOL_HASH_VERSION) == labels.NODEPOOL_HASH_VERSION
    if claim_hash is not None and same_version and claim_hash != hashing.nodepool_hash(pool):
        return CoreDriftReason.NODEPOOL_DRIFTED
    pool_reqs = requirements.Requirements.from_node_selector(pool.template.requirements)
    claim_reqs = requirements.Requirements.from_labels(claim.metadata.labels)
    if claim_reqs.compatible(pool_reqs) is not None:
        return CoreDriftReason.REQUIREMENTS_DRIFTED
    return None


def with_disruption_conditions(
    claim: nodeclaim.NodeClaim,
    pool: nodepool.NodePool,
    *,
    now: float,
    provider_drift: str | None,
) -> tuple[meta.Condition, ...]:
    """The claim's conditions with Consolidatable and Drifted brought up to date.

    `provider_drift` is what `CloudProvider.is_drifted` answered (only consulted by the caller when
    `static_drift` found nothing). Conditions that do not hold are removed, as upstream clears them."""
    out = claim.status.conditions
    verdict = consolidatable(claim, pool, now=now)
    if verdict.ready:
        out = conditions.set_condition(out, nodeclaim.CONSOLIDATABLE, conditions.TRUE, now=now)
    else:
        out = _without(out, nodeclaim.CONSOLIDATABLE)
    if not claim.is_true(nodeclaim.LAUNCHED):
        return _without(out, nodeclaim.DRIFTED)
    reason = static_drift(claim, pool) or provider_drift
    if reason:
        out = conditions.set_condition(out, nodeclaim.DRIFTED, conditions.TRUE, now=now, reason=str(reason))
    else:
        out = _without(out, nodeclaim.DRIFTED)
    return out


def requeue_after(claim: nodeclaim.NodeClaim, pool: nodepool.NodePool, *, now: float) -> float:
    """When to look at the claim again: when it becomes consolidatable, or at the next drift check."""
    wait = consolidatable(claim, pool, now=now).wait
    return min(DRIFT_REQUEUE, wait) if wait is not None else DRIFT_REQUEUE


def _without(items: tuple[meta.Condition, ...], type_: str) -> tuple[meta.Condition, ...]:
    return tuple(c for c in items if c.type != type_)
