"""PodDisruptionBudget arithmetic of the Eviction API, computed live from the pods (no disruption controller).

Mirrors upstream's `pkg/registry/core/pod/storage/eviction.go` and the disruption controller: pods that are
terminal, Pending or already deleting ignore budgets; more than one matching budget is a 500; a budget allowing no
disruption is a 429; an unready pod may go when the budget is healthy (`IfHealthyBudget`) or always (`AlwaysAllow`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy_emulator.apiserver import api_status, selectors

Scale = Callable[[Mapping[str, Any]], tuple[str, int] | None]
"""A pod's controller as (uid, desired replicas), or None for a bare pod."""

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


class Verdict(enum.StrEnum):
    ALLOWED = "Allowed"
    BUDGET_EXHAUSTED = "BudgetExhausted"
    MULTIPLE_BUDGETS = "MultipleBudgets"


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    expected_pods: int
    current_healthy: int
    desired_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.current_healthy - self.desired_healthy)


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    budgets: tuple[Budget, ...] = ()

    def error(self) -> api_status.ApiError | None:
        """The API server's answer when the eviction is refused, else None."""
        match self.verdict:
            case Verdict.ALLOWED:
                return None
            case Verdict.MULTIPLE_BUDGETS:
                return api_status.ApiError(500, "InternalError", MULTIPLE)
            case Verdict.BUDGET_EXHAUSTED:
                budget = self.budgets[0]
                cause = api_status.Cause(
                    "",
                    f"The disruption budget {budget.name} needs {budget.desired_healthy} healthy pods and has "
                    f"{budget.current_healthy} currently",
                    reason="DisruptionBudget",
                )
                return api_status.ApiError(429, "TooManyRequests", VIOLATION, details={"causes": [cause.body()]})


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_healthy(pod: Mapping[str, Any]) -> bool:
    """Counted by the disruption controller: Ready and not being deleted."""
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and is_ready(pod)


def ignores_budgets(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    return deleting or phase in ("Succeeded", "Failed", "Pending")


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """policy/v1: a null selector selects nothing, an empty one selects every pod of the namespace."""
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return selectors.labels_match(selectors.from_label_selector(selector), labels)


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise ValueError(f"invalid int-or-percent {value!r}")
    return math.ceil(int(value[:-1]) * total / 100)


def _expected_scale(pods: Sequence[Mapping[str, Any]], scale: Scale) -> int | None:
    """Sum of the desired replicas of the pods' controllers; None when a pod has none (upstream then fails safe)."""
    replicas: dict[str, int] = {}
    for pod in pods:
        found = scale(pod)
        if found is None:
            return None
        replicas[found[0]] = found[1]
    return sum(replicas.values())


def budget(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], scale: Scale) -> Budget:
    """The budget of `pdb` over `pods` (all pods of its namespace; this picks the ones it selects).

    As upstream's disruption controller: an integer minAvailable counts the selected pods; maxUnavailable and
    percentages count the desired replicas of their controllers (so an eviction does not shrink the budget), and
    with a bare pod among them no disruption is allowed.
    """
    spec = pdb.get("spec") or {}
    selected = [p for p in pods if selects(pdb, p)]
    healthy = sum(1 for p in selected if is_healthy(p))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    expected: int | None = len(selected)
    if max_unavailable is not None or isinstance(min_available, str):
        expected = _expected_scale(selected, scale)
    if expected is None:
        expected, desired = len(selected), healthy
    elif max_unavailable is not None:
        desired = max(0, expected - _scaled(max_unavailable, expected))
    elif min_available is not None:
        desired = _scaled(min_available, expected)
    else:
        desired = 0  # neither set (policy/v1 has no default): the disruption controller leaves desiredHealthy at 0
    name = (pdb.get("metadata") or {}).get("name", "")
    return Budget(name=name, expected_pods=expected, current_healthy=healthy, desired_healthy=desired)


def decide(
    pod: Mapping[str, Any], pdbs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], scale: Scale
) -> Decision:
    """May `pod` be evicted now? `pdbs` and `pods` are everything in the pod's namespace."""
    if ignores_budgets(pod):
        return Decision(Verdict.ALLOWED)
    matching = [pdb for pdb in pdbs if selects(pdb, pod)]
    if not matching:
        return Decision(Verdict.ALLOWED)
    budgets = tuple(budget(pdb, pods, scale) for pdb in matching)
    if len(matching) > 1:
        return Decision(Verdict.MULTIPLE_BUDGETS, budgets)
    only = budgets[0]
    if only.disruptions_allowed > 0:
        return Decision(Verdict.ALLOWED, budgets)
    if not is_ready(pod):
        policy = (matching[0].get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        if policy == "AlwaysAllow" or only.current_healthy >= only.desired_healthy:
            return Decision(Verdict.ALLOWED, budgets)
    return Decision(Verdict.BUDGET_EXHAUSTED, budgets)
