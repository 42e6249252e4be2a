"""The NodeClaim disruption conditions, Consolidatable and Drifted (pure; core: pkg/controllers/nodeclaim/disruption).

Consolidatable: the pool allows consolidation (consolidateAfter is not Never), the claim is Initialized, and
`now − (lastPodEventTime or the Initialized transition) ≥ consolidateAfter`. Drifted, checked in upstream's order:
the pool's template hash differs from the claim's (only when both carry the same hash version) → NodePoolDrifted;
the claim's labels no longer satisfy the pool's requirements → RequirementsDrifted; else the provider's reason.
Only Launched claims are checked for drift. Between requirement drift and the provider, a claim at least an hour
old whose instance type, or whose offering (zone × capacity type), is gone from the pool's catalogue has drifted
with InstanceTypeNotFound (rechecked every 30 min).

`lastPodEventTime` (read by Consolidatable) moves when a pod binds to the claim's node (its PodScheduled
transition time), turns terminal or starts terminating there, or leaves it (`pod_event_time` decides).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import requirements
from karpy.api import decoding, hashing, labels, meta, nodeclaim, nodepool
from karpy.cloudprovider import types
from karpy.nodeclaim import conditions

DRIFT_REQUEUE = 300.0
"""Seconds between drift checks of a claim (upstream requeues drift every 5 min)."""
INSTANCE_TYPE_DRIFT_MIN_AGE = 3600.0
"""A claim younger than this is never InstanceTypeNotFound (a fresh catalogue may lag a launch)."""
INSTANCE_TYPE_DRIFT_INTERVAL = 1800.0
"""Seconds between instance-type drift checks of one claim (the catalogue changes rarely; it is costly to list)."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class CoreDriftReason(enum.StrEnum):
    """Drift found by core, before asking the cloud provider (core: nodeclaim/disruption/drift.go)."""

    NODEPOOL_DRIFTED = "NodePoolDrifted"
    REQUIREMENTS_DRIFTED = "RequirementsDrifted"
    INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"


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
    out = with_consolidatable(claim, pool, now=now)
    if not claim.is_true(nodeclaim.LAUNCHED):
        return _without(out, nodeclaim.DRIFTED)
    reason = static_drift(claim, pool) or provider_drift
    if reason:
        out = conditions.set_condition(out, nodeclaim.DRIFTED, conditions.TRUE, now=now, reason=str(reason))
    else:
        out = _without(out, nodeclaim.DRIFTED)
    return out


def with_consolidatable(
    claim: nodeclaim.NodeClaim, pool: nodepool.NodePool, *, now: float
) -> tuple[meta.Condition, ...]:
    """The claim's conditions with Consolidatable brought up to date (True, or removed as upstream clears it)."""
    if consolidatable(claim, pool, now=now).ready:
        return conditions.set_condition(claim.status.conditions, nodeclaim.CONSOLIDATABLE, conditions.TRUE, now=now)
    return _without(claim.status.conditions, nodeclaim.CONSOLIDATABLE)


def requeue_after(claim: nodeclaim.NodeClaim, pool: nodepool.NodePool, *, now: float) -> float:
    """When to look at the claim again: when it becomes consolidatable, or at the next drift check."""
    wait = consolidatable(claim, pool, now=now).wait
    return min(DRIFT_REQUEUE, wait) if wait is not None else DRIFT_REQUEUE


def _without(items: tuple[meta.Condition, ...], type_: str) -> tuple[meta.Condition, ...]:
    return tuple(c for c in items if c.type != type_)


def instance_type_missing(claim: nodeclaim.NodeClaim, catalog: Iterable[types.InstanceType]) -> bool:
    """True when nothing in `catalog` can be what the claim runs on: its instance type label is missing or names no
    type, or no offering of that type matches the claim's zone and capacity type (availability does not matter: a
    temporarily exhausted offering still exists)."""
    name = claim.metadata.labels.get(labels.LABEL_INSTANCE_TYPE)
    if not name:
        return True
    found = next((t for t in catalog if t.name == name), None)
    if found is None:
        return True
    return not any(_offering_matches(o, claim.metadata.labels) for o in found.offerings)


def _offering_matches(offering: types.Offering, claim_labels: Mapping[str, str]) -> bool:
    return all(claim_labels.get(key, value) == value for key, value in offering.labels().items())


def instance_type_check_due(claim: nodeclaim.NodeClaim, *, now: float, last_check: float | None) -> float | None:
    """Seconds until the instance-type drift check may run (0: now); None while the claim has no creation time."""
    created = claim.metadata.creation_timestamp
    if created is None:
        return None
    earliest = created + INSTANCE_TYPE_DRIFT_MIN_AGE
    if last_check is not None:
        earliest = max(earliest, last_check + INSTANCE_TYPE_DRIFT_INTERVAL)
    return max(0.0, earliest - now)


@dataclass(frozen=True, slots=True)
class PodEvent:
    node_name: str
    at: float  # whole epoch seconds: `status.lastPodEventTime` is written with second precision


def pod_event_time(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, *, now: float) -> PodEvent | None:
    """Whether an observed pod change moves its node's `lastPodEventTime`, and to when (core: nodeclaim/podevents).

    `old`/`new` are the pod before and after the change (None: absent). Counts: a bind (PodScheduled turns True or
    its transition time changes; the time is that transition's), the pod turning terminal or starting to terminate
    on the node, and a still-running pod vanishing from it (now). DaemonSet pods never count: they follow the node.
    """
    pod = new if new is not None else old
    if pod is None or _daemonset_owned(pod):
        return None
    node = _node_name(new) or _node_name(old)
    if not node:
        return None
    if new is None:  # deleted: it leaves the node, unless it had already gone terminal / terminating (counted then)
        return None if old is not None and _leaving(old) else PodEvent(node, math.floor(now))
    if _leaving(new):
        return None if old is not None and _leaving(old) else PodEvent(node, math.floor(now))
    scheduled = _scheduled(new)
    if scheduled is not None:
        changed = old is None or scheduled != _scheduled(old)
        return PodEvent(node, math.floor(scheduled)) if changed else None
    if old is not None and not _node_name(old):  # bound just now, without a PodScheduled time to date it by
        return PodEvent(node, math.floor(now))
    return None


def _leaving(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") in TERMINAL_PHASES or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _node_name(pod: Mapping[str, Any] | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


def _daemonset_owned(pod: Mapping[str, Any]) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(r, Mapping) and r.get("controller") and r.get("kind") == "DaemonSet" for r in refs)


def _scheduled(pod: Mapping[str, Any]) -> float | None:
    """The transition time of a True PodScheduled condition, None otherwise (or when it has no usable time)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            when = condition.get("lastTransitionTime")
            if condition.get("status") != "True" or not isinstance(when, str):
                return None
            try:
                return decoding.timestamp(when)
            except ValueError:
                return None
    return None
