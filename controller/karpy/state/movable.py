"""Which pods of a node on its way out can move now (pure; core: pkg/utils/pdb/pdb.go `IsCurrentlyReschedulable`,
kubernetes-sigs/karpenter#2033).

A reschedulable pod of a deleting node stays where it is, and gets no new capacity, while it has an active
`karpenter.sh/do-not-disrupt` annotation or a PodDisruptionBudget can never let it be evicted: `maxUnavailable` 0 or
"0%", `minAvailable` "100%", or more than one PDB selecting it (the Eviction API refuses those). Capacity bought for
such a pod would stand empty until it goes, and its nomination would keep consolidation away. A PDB that allows no
disruption *now* but could later (a replica not Ready yet) does not hold the pod: upstream provisions for it, as the
replacement is what lets the eviction through. A pod that is not Ready may always be evicted under
`unhealthyPodEvictionPolicy: AlwaysAllow`, and a pod the drain would not evict (terminating, or tolerating the
`karpenter.sh/disrupted` taint) is not held by a PDB (core: utils/pod `IsEvictable`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import requirements
from karpy.api import donotdisrupt, labels, meta
from karpy.scheduling import pods
from karpy.state import facts

_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
ALWAYS_ALLOW = "AlwaysAllow"
_DISRUPTED = meta.Taint(labels.TAINT_DISRUPTED_KEY, labels.EFFECT_NO_SCHEDULE)


def selector(obj: Mapping[str, Any]) -> requirements.Requirements | None:
    """A PDB's `spec.selector` as requirements; None when unusable (a nil selector selects nothing in policy/v1)."""
    found = (obj.get("spec") or {}).get("selector")
    if not isinstance(found, Mapping):
        return None
    reqs = [requirements.Requirement.in_(str(k), (str(v),)) for k, v in (found.get("matchLabels") or {}).items()]
    for expr in found.get("matchExpressions") or ():
        if not isinstance(expr, Mapping) or expr.get("operator") not in _SELECTOR_OPERATORS:
            return None
        values = [str(v) for v in expr.get("values") or ()]
        reqs.append(requirements.Requirement.new(str(expr.get("key", "")), str(expr["operator"]), values=values))
    return requirements.Requirements(reqs)


@dataclass(frozen=True, slots=True)
class Budget:
    """What holding a pod in place reads of a PodDisruptionBudget."""

    key: str
    namespace: str
    selector: requirements.Requirements
    fully_blocking: bool
    evicts_unhealthy: bool

    def selects(self, namespace: str, pod_labels: Mapping[str, str]) -> bool:
        return self.namespace == namespace and self.selector.admits(pod_labels)


def fully_blocking(spec: Mapping[str, Any]) -> bool:
    """Whether a PDB's spec can never allow an eviction, as upstream reads it (`newPdb` isFullyBlocking)."""
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    return (
        (isinstance(max_unavailable, int) and not isinstance(max_unavailable, bool) and max_unavailable == 0)
        or max_unavailable == "0%"
        or min_available == "100%"
    )


def budget(obj: Mapping[str, Any]) -> Budget | None:
    """The PDB manifest as a Budget; None when its selector is unusable."""
    found = selector(obj)
    if found is None:
        return None
    spec = obj.get("spec") or {}
    return Budget(
        key=facts.key(obj),
        namespace=str(facts.metadata(obj).get("namespace") or ""),
        selector=found,
        fully_blocking=fully_blocking(spec),
        evicts_unhealthy=spec.get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW,
    )


def budgets(objs: Iterable[Mapping[str, Any]]) -> list[Budget]:
    return [b for b in (budget(o) for o in objs) if b is not None]


def _not_ready(manifest: Mapping[str, Any]) -> bool:
    for condition in (manifest.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "False"
    return False


def stays(pod: pods.Pod, manifest: Mapping[str, Any], held_by: Sequence[Budget], *, now: float) -> bool:
    """Whether `pod` (its scheduling view and stored manifest) cannot be evicted for now, so it needs no new home."""
    if pod.terminating:
        return False  # not active: neither do-not-disrupt nor a PDB holds it (core: IsDisruptable, IsEvictable)
    if donotdisrupt.pod_active(manifest, now=now):
        return True
    if any(t.tolerates(_DISRUPTED) for t in pod.tolerations):
        return False  # the drain leaves it, so no PDB is asked (core: IsEvictable)
    matching = [b for b in held_by if b.selects(pod.namespace, pod.labels)]
    if len(matching) > 1:
        return True
    return bool(matching) and matching[0].fully_blocking and not (matching[0].evicts_unhealthy and _not_ready(manifest))


def staying(
    candidates: Iterable[pods.Pod],
    manifest: Callable[[str], Mapping[str, Any] | None],
    held_by: Sequence[Budget],
    *,
    now: float,
) -> frozenset[str]:
    """Keys of `candidates` that `stays`; `manifest(key)` is a pod's stored manifest (a pod without one moves)."""
    out: set[str] = set()
    for p in candidates:
        found = manifest(p.key)
        if found is not None and stays(p, found, held_by, now=now):
            out.add(p.key)
    return frozenset(out)
