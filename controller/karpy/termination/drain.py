"""Which pods a draining node must evict or delete now (pure; core: node/termination/terminator, utils/pod).

Pods are read from their manifest dicts into `DrainPod`, the few fields draining needs. `plan` then splits them:

* waiting: pods the node still waits for — not terminal, not tolerating the `karpenter.sh/disrupted:NoSchedule`
  taint, not mirror pods, not stuck terminating (deleted more than a minute past their deletion timestamp);
* delete: waiting pods, not yet terminating, past their force threshold — the node's termination time (from the
  NodeClaim's terminationGracePeriod) minus the pod's own terminationGracePeriodSeconds — deleted so they get their
  full grace period before the instance goes. This is the only path that removes a pod without the Eviction API,
  and only once the NodeClaim's terminationGracePeriod says so;
* evict: active pods that may go through the Eviction API now, only the first non-empty of the four tiers
  (non-critical non-DaemonSet → non-critical DaemonSet → critical non-DaemonSet → critical DaemonSet). Pods with an
  active `karpenter.sh/do-not-disrupt` are never evicted; they hold the drain until they finish or the TGP forces
  them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final

from karpy.api import decoding, donotdisrupt, labels, meta
from karpy.scheduling import taints

STUCK_TERMINATING_AFTER: Final = 60.0
"""A terminating pod this long past its deletionTimestamp no longer holds the drain (utils/pod IsStuckTerminating)."""
DEFAULT_POD_GRACE: Final = 30
"""corev1 default of `spec.terminationGracePeriodSeconds`."""
CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
DISRUPTED_TAINT: Final = meta.Taint(labels.TAINT_DISRUPTED_KEY, labels.EFFECT_NO_SCHEDULE)
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})


class Tier(enum.IntEnum):
    """Eviction order (graceful node shutdown order): lower tiers go first."""

    NON_CRITICAL = 0
    NON_CRITICAL_DAEMON = 1
    CRITICAL = 2
    CRITICAL_DAEMON = 3


@dataclasses.dataclass(frozen=True, slots=True)
class DrainPod:
    namespace: str
    name: str
    uid: str = ""
    phase: str = "Running"
    priority_class: str = ""
    daemon: bool = False
    mirror: bool = False
    tolerates_disrupted: bool = False
    do_not_disrupt: str | None = None  # the raw annotation value
    started: float | None = None  # status.startTime (None until the kubelet started the pod)
    deletion_timestamp: float | None = None
    grace_seconds: int = DEFAULT_POD_GRACE
    pvc_names: tuple[str, ...] = ()
    readable: bool = True
    """False for a pod whose manifest karpy cannot read (`unreadable`): the drain waits for it, and never evicts
    or deletes it."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def tier(self) -> Tier:
        critical = self.priority_class in CRITICAL_PRIORITY_CLASSES
        if critical:
            return Tier.CRITICAL_DAEMON if self.daemon else Tier.CRITICAL
        return Tier.NON_CRITICAL_DAEMON if self.daemon else Tier.NON_CRITICAL


@dataclasses.dataclass(frozen=True, slots=True)
class DrainPlan:
    delete: tuple[DrainPod, ...]
    evict: tuple[DrainPod, ...]
    waiting: tuple[DrainPod, ...]

    @property
    def drained(self) -> bool:
        return not self.waiting


def _owned_by(md: Mapping[str, Any], api_version: str, kind: str) -> bool:
    return any(o.get("apiVersion") == api_version and o.get("kind") == kind for o in md.get("ownerReferences") or ())


def unreadable(pod: Mapping[str, Any]) -> DrainPod:
    """A pod `from_manifest` cannot read: known by name only, it holds the drain and is left alone."""
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return DrainPod(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""), readable=False)


def from_manifest(pod: Mapping[str, Any]) -> DrainPod:
    """The draining view of a pod dict; absent fields take the API server's defaults."""
    md = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    tolerations = tuple(
        taints.Toleration(
            key=str(t.get("key", "")),
            operator=str(t.get("operator", taints.OP_EQUAL)),
            value=str(t.get("value", "")),
            effect=str(t.get("effect", "")),
        )
        for t in spec.get("tolerations") or ()
    )
    grace = spec.get("terminationGracePeriodSeconds")
    annotations = md.get("annotations") or {}
    return DrainPod(
        namespace=str(md.get("namespace", "")),
        name=str(md.get("name", "")),
        uid=str(md.get("uid", "")),
        phase=str(status.get("phase", "Running")),
        priority_class=str(spec.get("priorityClassName", "")),
        daemon=_owned_by(md, "apps/v1", "DaemonSet"),
        mirror=_owned_by(md, "v1", "Node"),
        tolerates_disrupted=taints.untolerated([DISRUPTED_TAINT], tolerations) is None,
        do_not_disrupt=annotations.get(labels.ANNOTATION_DO_NOT_DISRUPT),
        started=donotdisrupt.start_time(pod),
        deletion_timestamp=decoding.timestamp_or_none(md.get("deletionTimestamp")),
        grace_seconds=int(grace) if isinstance(grace, int) else DEFAULT_POD_GRACE,
        pvc_names=tuple(
            str(v["persistentVolumeClaim"]["claimName"])
            for v in spec.get("volumes") or ()
            if isinstance(v.get("persistentVolumeClaim"), Mapping) and "claimName" in v["persistentVolumeClaim"]
        ),
    )


def do_not_disrupt_active(pod: DrainPod, now: float) -> bool:
    """`karpenter.sh/do-not-disrupt`, "true" or a duration since the pod started (`donotdisrupt.active`)."""
    return donotdisrupt.active(pod.do_not_disrupt, started=pod.started, now=now)


def stuck_terminating(pod: DrainPod, now: float) -> bool:
    return pod.deletion_timestamp is not None and now - pod.deletion_timestamp > STUCK_TERMINATING_AFTER


def drainable(pod: DrainPod, now: float) -> bool:
    """utils/pod IsDrainable: the node must wait for it (do-not-disrupt pods included: they stall the drain)."""
    return not pod.tolerates_disrupted and not stuck_terminating(pod, now) and not pod.mirror


def waiting_eviction(pod: DrainPod, now: float) -> bool:
    return not pod.terminal and drainable(pod, now)


def evictable(pod: DrainPod, now: float) -> bool:
    """utils/pod IsEvictable, with the do-not-disrupt duration form."""
    return (
        pod.readable
        and not pod.terminal
        and not pod.terminating
        and not pod.tolerates_disrupted
        and not pod.mirror
        and not do_not_disrupt_active(pod, now)
    )


def force_delete_at(pod: DrainPod, termination_time: float | None) -> float | None:
    """When the pod must be deleted to get its full grace period before the node is forced down, or None."""
    if termination_time is None:
        return None
    return termination_time - pod.grace_seconds


def plan(pods: Iterable[DrainPod], *, now: float, termination_time: float | None) -> DrainPlan:
    """What to do now; see the module docstring. Output order is stable (by namespace/name)."""
    ordered = sorted(pods, key=lambda p: p.key)
    waiting = tuple(p for p in ordered if waiting_eviction(p, now))
    delete = tuple(
        p
        for p in waiting
        if p.readable and not p.terminating and (at := force_delete_at(p, termination_time)) is not None and now > at
    )
    forced = {p.key for p in delete}
    candidates = [p for p in ordered if evictable(p, now) and p.key not in forced]
    evict: tuple[DrainPod, ...] = ()
    for tier in Tier:
        in_tier = tuple(p for p in candidates if p.tier is tier)
        if in_tier:
            evict = in_tier
            break
    return DrainPlan(delete=delete, evict=evict, waiting=waiting)


def delete_grace_seconds(termination_time: float, now: float) -> int:
    """The grace period of a forced delete: the time left before the node goes, never negative."""
    return max(0, int(termination_time - now))


def blocking_attachments(
    attachments: Iterable[Mapping[str, Any]], *, node_name: str, ignored_volumes: frozenset[str]
) -> list[str]:
    """Names of VolumeAttachments on `node_name` that still hold termination.

    Attachments without a PersistentVolume source, and those of volumes used only by pods the drain does not wait
    for (`ignored_volumes`: PV names of undrainable pods), do not block (node/termination filterVolumeAttachments).
    """
    out = []
    for va in attachments:
        spec = va.get("spec") or {}
        if spec.get("nodeName") != node_name:
            continue
        pv = (spec.get("source") or {}).get("persistentVolumeName")
        if not pv or pv in ignored_volumes:
            continue
        out.append(str((va.get("metadata") or {}).get("name", "")))
    return sorted(out)


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Per-pod exponential backoff after a refused eviction (upstream eviction queue: 100 ms doubling to 10 s)."""

    base: float = 0.1
    cap: float = 10.0

    def delay(self, failures: int) -> float:
        return float(min(self.cap, self.base * 2.0 ** max(0, failures - 1)))


def disrupted_patch(node: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Node merge patch that cordons it for termination, None when already done (terminator.Taint).

    Adds `karpenter.sh/disrupted:NoSchedule` (replacing any other taint with that key) and labels the node
    `node.kubernetes.io/exclude-from-external-load-balancers=karpenter` so load balancers stop sending it traffic
    before it goes. The taint list is replaced whole, so the patch carries the resourceVersion.
    """
    md = node.get("metadata") or {}
    raw_taints = list((node.get("spec") or {}).get("taints") or ())
    present = any(
        t.get("key") == DISRUPTED_TAINT.key and t.get("effect") == DISRUPTED_TAINT.effect and not t.get("value")
        for t in raw_taints
    )
    patch_meta: dict[str, Any] = {}
    patch: dict[str, Any] = {}
    if not present:
        kept = [t for t in raw_taints if t.get("key") != DISRUPTED_TAINT.key]
        patch["spec"] = {"taints": [*kept, {"key": DISRUPTED_TAINT.key, "effect": DISRUPTED_TAINT.effect}]}
    if (md.get("labels") or {}).get(labels.LABEL_EXCLUDE_FROM_LB) != "karpenter":
        patch_meta["labels"] = {labels.LABEL_EXCLUDE_FROM_LB: "karpenter"}
    if not patch and not patch_meta:
        return None
    if md.get("resourceVersion"):
        patch_meta["resourceVersion"] = md["resourceVersion"]
    patch["metadata"] = patch_meta
    return patch
