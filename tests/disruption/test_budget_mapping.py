"""The budget left per NodePool and reason (`karpy.disruption.budgets.budget_mapping`), on a real cluster model: the
cases of upstream's `Describe("BuildDisruptionBudgetMapping")` (pkg/controllers/disruption/suite_test.go), each named
by its `It`, plus the two `StateNode` rules (state/statenode.go `Managed`, `Deleted`) no upstream case pins."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool, parse
from karpy.disruption import budgets
from karpy.kube import resources

Reason = nodepool.DisruptionReason
Step = Callable[[disruption_world.World], None]
NODES = 10
"""Upstream's BeforeEach: ten initialized nodes of one NodePool."""


def _deleted(res: resources.Resource, name: str) -> Step:
    def step(w: disruption_world.World) -> None:
        obj = w.kube.obj(res, name)
        assert obj is not None
        obj["metadata"]["deletionTimestamp"] = disruption_world.ts(w.clock.now())

    return step


def _marked(name: str) -> Step:
    return lambda w: w.cluster.mark_for_deletion(name)


def _not_ready(name: str) -> Step:
    def step(w: disruption_world.World) -> None:
        node = w.kube.obj(resources.NODES, name)
        assert node is not None
        node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]

    return step


def _unmanaged(name: str) -> Step:
    def step(w: disruption_world.World) -> None:
        w.kube.put(resources.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})

    return step


def _orphan(name: str) -> Step:
    """A Node of the pool (its labels say so) whose NodeClaim is gone."""

    def step(w: disruption_world.World) -> None:
        w.node(name)
        w.kube.objects.pop((resources.NODECLAIMS.plural, "", name))

    return step


def _uninitialized(name: str) -> Step:
    def step(w: disruption_world.World) -> None:
        w.node(name, conditions=())
        claim, node = w.kube.obj(resources.NODECLAIMS, name), w.kube.obj(resources.NODES, name)
        assert claim is not None
        assert node is not None
        claim["status"]["conditions"] = [c for c in claim["status"]["conditions"] if c["type"] != "Initialized"]
        del node["metadata"]["labels"][labels.LABEL_INITIALIZED]

    return step


def _instance_terminating(name: str) -> Step:
    def step(w: disruption_world.World) -> None:
        w.node(name)
        claim = w.kube.obj(resources.NODECLAIMS, name)
        assert claim is not None
        claim["status"]["conditions"].append(disruption_world.cond("InstanceTerminating"))

    return step


def _all(make: Callable[[str], Step]) -> list[Step]:
    return [make(f"n{i}") for i in range(NODES)]


@pytest.mark.parametrize(
    ("nodes", "steps", "expected"),
    [
        pytest.param(
            "100%",
            [_unmanaged("u0")],
            10,
            id="should not consider nodes that are not managed as part of disruption count",
        ),
        pytest.param(
            "100%",
            [_uninitialized("x0")],
            10,
            id="should not consider nodes that are not initialized as part of disruption count",
        ),
        pytest.param(
            "100%",
            [_instance_terminating("x0")],
            10,
            id="should not consider nodes that have the terminating status condition as part of disruption count",
        ),
        pytest.param(
            "10%",
            _all(lambda n: _deleted(resources.NODECLAIMS, n)) + _all(lambda n: _deleted(resources.NODES, n)),
            0,
            id="should not return a negative disruption value",
        ),
        pytest.param(
            "100%",
            [_deleted(resources.NODECLAIMS, "n0"), _deleted(resources.NODES, "n0"), _marked("n1")],
            8,
            id="should consider nodes with a deletion timestamp set and MarkedForDeletion to the disruption count",
        ),
        pytest.param(
            "100%",
            [_not_ready("n0"), _not_ready("n1")],
            8,
            id="should consider not ready nodes to the disruption count",
        ),
        # statenode.go `Managed`: a NodeClaim makes a node managed, not the NodePool label.
        pytest.param("100%", [_orphan("o0")], 10, id="a Node without its NodeClaim is not counted"),
        # statenode.go `Deleted`: a Node's deletion counts only when it has no NodeClaim.
        pytest.param(
            "100%", [_deleted(resources.NODES, "n0")], 10, id="a Node deleting under a live NodeClaim is not disrupting"
        ),
    ],
)
def test_upstream_budget_mapping(nodes: str, steps: Sequence[Step], expected: int) -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": nodes}])
    for i in range(NODES):
        w.node(f"n{i}")
    for step in steps:
        step(w)
    w.sync()
    pools = [parse.nodepool(w.kube.obj(resources.NODEPOOLS, "default") or {})]
    for reason in (Reason.EMPTY, Reason.UNDERUTILIZED, Reason.DRIFTED):
        got = budgets.budget_mapping(pools, w.cluster.state_nodes(), reason, now=w.clock.now())
        assert got == {"default": expected}, reason
