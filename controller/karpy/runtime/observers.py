"""Reactions to the state cache's watch events (a `state.Cluster` listener): provisioning triggers and lifecycle
metrics. The decisions are pure functions of (resource, old, new); `Observer` applies them.

Triggers (upstream: the pod controller triggers on provisionable pods, the node / NodeClaim controllers on a
starting deletion or the disrupted taint, so replacements launch while the old node drains instead of at the
provisioner's 10 s rescan):
* a pod that is provisionable after the event;
* a NodeClaim or Node whose deletion just started;
* a Node that just got the `karpenter.sh/disrupted` taint.

Metrics, counted only by the leader (each replica sees every event; one must count):
* `karpenter_nodes_created_total{nodepool,zone}` when a NodeClaim turns Registered (upstream counts at registration);
* `karpenter_nodeclaims_terminated_total{nodepool,capacity_type,zone}` when a NodeClaim object is gone: its
  `karpenter.sh/termination` finalizer is released only after its instance is terminated;
* `karpenter_pods_bound_duration_seconds` when a pod's PodScheduled condition turns True and
  `karpenter_pods_startup_duration_seconds` when its Ready condition does: the condition's lastTransitionTime minus
  the pod's creationTimestamp (core: controllers/metrics/pod/controller.go), so no clock is read;
* `karpenter_pods_provisioning_bound_duration_seconds` and `_startup_duration_seconds` at the same transitions,
  measured from when the provisioner first found the pod a place (`provisioning.podtimes`) instead.

The provisioner's first sight of a pending pod is recorded here too, on the event that triggers it (upstream acks
the pod in its provisioning trigger: core: provisioning/controller.go), and forgotten once the pod started, ended
or is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import decoding, labels
from karpy.api import nodeclaim as api_nodeclaim
from karpy.kube import resources
from karpy.provisioning import podtimes
from karpy.state import facts

Obj = Mapping[str, Any] | None


def _meta(obj: Obj) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _deleting(obj: Obj) -> bool:
    return obj is not None and bool(_meta(obj).get("deletionTimestamp"))


def _disrupted(node: Obj) -> bool:
    taints = ((node or {}).get("spec") or {}).get("taints") or ()
    return any(t.get("key") == labels.TAINT_DISRUPTED_KEY for t in taints if isinstance(t, Mapping))


def _condition_true(claim: Obj, type_: str) -> bool:
    for c in ((claim or {}).get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == type_:
            return c.get("status") == "True"
    return False


def provisioning_trigger(res: resources.Resource, old: Obj, new: Obj) -> str | None:
    """The key to trigger the provisioner's batch window with, or None (pure)."""
    if new is None:
        return None
    name = str(_meta(new).get("name") or "")
    if res == resources.PODS:
        if facts.pod_facts(new).provisionable:
            return str(_meta(new).get("uid") or facts.key(new))
        return None
    if res == resources.NODECLAIMS and _deleting(new) and not _deleting(old):
        return f"nodeclaim/{name}"
    if res == resources.NODES and (
        (_deleting(new) and not _deleting(old)) or (_disrupted(new) and not _disrupted(old))
    ):
        return f"node/{name}"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeClaimGone:
    nodepool: str
    capacity_type: str
    zone: str


def nodeclaim_gone(res: resources.Resource, old: Obj, new: Obj) -> NodeClaimGone | None:
    """A NodeClaim object disappeared (its termination finished), with the labels the metric carries (pure)."""
    if res != resources.NODECLAIMS or old is None or new is not None:
        return None
    claim_labels = _meta(old).get("labels") or {}
    return NodeClaimGone(
        nodepool=str(claim_labels.get(labels.LABEL_NODEPOOL, "")),
        capacity_type=str(claim_labels.get(labels.LABEL_CAPACITY_TYPE, "")),
        zone=str(claim_labels.get(labels.LABEL_ZONE, "")),
    )


def node_registered(res: resources.Resource, old: Obj, new: Obj) -> str | None:
    """The NodePool of a NodeClaim that just turned Registered (its Node joined), else None (pure)."""
    if res != resources.NODECLAIMS or new is None:
        return None
    if _condition_true(new, api_nodeclaim.REGISTERED) and not _condition_true(old, api_nodeclaim.REGISTERED):
        return str((_meta(new).get("labels") or {}).get(labels.LABEL_NODEPOOL, ""))
    return None


POD_SCHEDULED = "PodScheduled"
POD_READY = "Ready"


def _pod_condition(pod: Obj, type_: str) -> Mapping[str, Any] | None:
    for c in ((pod or {}).get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == type_:
            return c
    return None


def pod_condition_turned(res: resources.Resource, old: Obj, new: Obj, condition: str) -> float | None:
    """When `condition` turned True (its lastTransitionTime), if this event is the one that turned it True; None
    otherwise or when the timestamp is missing or unreadable (pure)."""
    if res != resources.PODS or new is None:
        return None
    now_true = _pod_condition(new, condition)
    if now_true is None or now_true.get("status") != "True":
        return None
    before = _pod_condition(old, condition)
    if before is not None and before.get("status") == "True":
        return None
    try:
        return decoding.timestamp(str(now_true["lastTransitionTime"]))
    except (KeyError, ValueError):
        return None


def pod_condition_age(res: resources.Resource, old: Obj, new: Obj, condition: str) -> float | None:
    """Seconds from the pod's creation until `condition` turned True, when this event is the one that turned it
    True; None otherwise or when a timestamp is missing or unreadable (pure)."""
    return _age(new, pod_condition_turned(res, old, new, condition))


def _age(new: Obj, turned: float | None) -> float | None:
    """Seconds from `new`'s creation until `turned` (None when either is missing or unreadable)."""
    if turned is None or new is None:
        return None
    try:
        created = decoding.timestamp(str(_meta(new)["creationTimestamp"]))
    except (KeyError, ValueError):
        return None
    return max(0.0, turned - created)


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def pod_done(res: resources.Resource, old: Obj, new: Obj, *, ready_turned: float | None) -> str | None:
    """The key of a pod that is gone, ended, or just turned Ready (`ready_turned`: `pod_condition_turned` of Ready
    for this event): nothing more is timed from it (pure)."""
    if res != resources.PODS or (old is None and new is None):
        return None
    if new is None:
        return facts.key(old or {})
    if ((new.get("status") or {}).get("phase")) in TERMINAL_PHASES:
        return facts.key(new)
    return facts.key(new) if ready_turned is not None else None


@dataclasses.dataclass(frozen=True, slots=True)
class Hooks:
    trigger: Callable[[str], None]
    """The provisioner's `trigger`."""
    nodeclaim_terminated: Callable[[NodeClaimGone], None]
    node_created: Callable[[str, str], None]
    """(nodepool, zone) of a NodeClaim that just turned Registered."""
    leading: Callable[[], bool]
    pod_bound: Callable[[float], None] = lambda _seconds: None
    """Seconds from a pod's creation until it was bound (karpenter_pods_bound_duration_seconds)."""
    pod_started: Callable[[float], None] = lambda _seconds: None
    """Seconds from a pod's creation until it was Ready (karpenter_pods_startup_duration_seconds)."""
    pod_times: podtimes.PodTimes | None = None
    """The provisioner's record of when it saw, decided on and placed each pending pod; None keeps none."""
    pod_provisioning_bound: Callable[[float], None] = lambda _seconds: None
    """Seconds from the provisioner first placing a pod until it was bound
    (karpenter_pods_provisioning_bound_duration_seconds)."""
    pod_provisioning_started: Callable[[float], None] = lambda _seconds: None
    """Seconds from the provisioner first placing a pod until it was Ready
    (karpenter_pods_provisioning_startup_duration_seconds)."""


class Observer:
    """A `state.Cluster` listener: `cluster.add_listener(Observer(hooks))`."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks

    def __call__(self, res: resources.Resource, old: Obj, new: Obj) -> None:
        hooks = self._hooks
        if not hooks.leading():
            return  # a follower's provisioner does not run and its counts would double the leader's
        key = provisioning_trigger(res, old, new)
        if key is not None:
            hooks.trigger(key)
        gone = nodeclaim_gone(res, old, new)
        if gone is not None:
            hooks.nodeclaim_terminated(gone)
        pool = node_registered(res, old, new)
        if pool is not None:
            hooks.node_created(pool, str((_meta(new).get("labels") or {}).get(labels.LABEL_ZONE, "")))
        if res == resources.PODS:
            self._pod_event(old, new, provisionable=key is not None)

    def _pod_event(self, old: Obj, new: Obj, *, provisionable: bool) -> None:
        """The pod metrics and timings; each condition's turn is read once per event (this runs for every pod
        event, and the conditions were read five times over)."""
        hooks = self._hooks
        scheduled = pod_condition_turned(resources.PODS, old, new, POD_SCHEDULED)
        ready = pod_condition_turned(resources.PODS, old, new, POD_READY)
        bound = _age(new, scheduled)
        if bound is not None:
            hooks.pod_bound(bound)
        started = _age(new, ready)
        if started is not None:
            hooks.pod_started(started)
        times = hooks.pod_times
        if times is None:
            return
        if provisionable and new is not None:
            times.seen(facts.key(new))
        if scheduled is not None or ready is not None:
            since = times.schedulable_since(facts.key(new or {}))
            if since is not None:
                for turned, observe in (
                    (scheduled, hooks.pod_provisioning_bound),
                    (ready, hooks.pod_provisioning_started),
                ):
                    if turned is not None:
                        observe(max(0.0, turned - since))
        done = pod_done(resources.PODS, old, new, ready_turned=ready)
        if done is not None:
            times.forget(done)
