"""The Eviction API's budget arithmetic, table-tested against upstream's rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests import builders

from karpy_emulator.apiserver import disruption


def _pods(ready: int, unready: int = 0, deleting: int = 0) -> list[dict[str, Any]]:
    pods = [builders.ready(builders.pod(f"r{i}", labels={"app": "web"})) for i in range(ready)]
    pods += [builders.pod(f"u{i}", labels={"app": "web"}) for i in range(unready)]
    for pod in pods[len(pods) - unready :]:
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    for i in range(deleting):
        pod = builders.ready(builders.pod(f"d{i}", labels={"app": "web"}))
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        pods.append(pod)
    return pods


def _scale_of(replicas: int | None) -> disruption.Scale:
    def scale(pod: Mapping[str, Any]) -> tuple[str, int] | None:
        return None if replicas is None else ("deployment-uid", replicas)

    return scale


@pytest.mark.parametrize(
    ("spec", "pods", "replicas", "desired", "allowed"),
    [
        ({"minAvailable": 2}, _pods(3), None, 2, 1),
        ({"minAvailable": 3}, _pods(3), None, 3, 0),
        ({"minAvailable": 2}, _pods(2, unready=1), None, 2, 0),  # the unready pod does not count as healthy
        ({"minAvailable": 2}, _pods(3, deleting=1), None, 2, 1),  # nor does a deleting one
        ({"minAvailable": "50%"}, _pods(3), 3, 2, 1),  # ceil(1.5)
        ({"maxUnavailable": 1}, _pods(3), 4, 3, 0),  # the controller wants 4: one is already missing
        ({"maxUnavailable": "25%"}, _pods(4), 4, 3, 1),
        ({"maxUnavailable": "30%"}, _pods(4), 4, 2, 2),  # ceil(1.2) = 2 unavailable
        ({"maxUnavailable": 1}, _pods(3), None, 3, 0),  # bare pods: no scale, fail safe
        ({}, _pods(2), None, 0, 2),
    ],
)
def test_budget(
    spec: dict[str, Any], pods: list[dict[str, Any]], replicas: int | None, desired: int, allowed: int
) -> None:
    budget = disruption.budget(builders.pdb("web", {"app": "web"}, **spec), pods, _scale_of(replicas))
    assert (budget.desired_healthy, budget.disruptions_allowed) == (desired, allowed)


def test_decisions() -> None:
    pods = _pods(2, unready=1)
    ready, unready = pods[0], pods[2]
    tight = builders.pdb("tight", {"app": "web"}, minAvailable=2)
    scale = _scale_of(None)
    assert disruption.decide(ready, [tight], pods, scale).verdict is disruption.Verdict.BUDGET_EXHAUSTED
    # IfHealthyBudget: an unready pod may go when the healthy count meets the budget (2 >= 2).
    assert disruption.decide(unready, [tight], pods, scale).verdict is disruption.Verdict.ALLOWED
    stricter = builders.pdb("stricter", {"app": "web"}, minAvailable=3)
    assert disruption.decide(unready, [stricter], pods, scale).verdict is disruption.Verdict.BUDGET_EXHAUSTED
    always = builders.pdb("always", {"app": "web"}, minAvailable=3, unhealthyPodEvictionPolicy="AlwaysAllow")
    assert disruption.decide(unready, [always], pods, scale).verdict is disruption.Verdict.ALLOWED
    loose = builders.pdb("loose", {"app": "web"}, minAvailable=0)
    assert disruption.decide(ready, [tight, loose], pods, scale).verdict is disruption.Verdict.MULTIPLE_BUDGETS
    other = builders.pdb("other", {"app": "db"}, minAvailable=5)
    assert disruption.decide(ready, [other], pods, scale).verdict is disruption.Verdict.ALLOWED
    null_selector = {"metadata": {"name": "null"}, "spec": {"minAvailable": 9}}
    assert disruption.decide(ready, [null_selector], pods, scale).verdict is disruption.Verdict.ALLOWED


def test_refusals_render_like_the_api_server() -> None:
    exhausted = disruption.Decision(disruption.Verdict.BUDGET_EXHAUSTED, (disruption.Budget("web", 3, 2, 2),))
    error = exhausted.error()
    assert error is not None
    assert (error.code, error.reason, error.message) == (429, "TooManyRequests", disruption.VIOLATION)
    assert (
        error.body()["details"]["causes"][0]["message"]
        == "The disruption budget web needs 2 healthy pods and has 2 currently"
    )
    multiple = disruption.Decision(disruption.Verdict.MULTIPLE_BUDGETS).error()
    assert multiple is not None
    assert multiple.code == 500
    assert disruption.Decision(disruption.Verdict.ALLOWED).error() is None
