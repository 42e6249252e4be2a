"""Disruption never acts on a partial view: a node holding a pod karpy cannot read is no candidate, a node whose
evaluation raises is left out (and reported) while the others are disrupted, and a simulation that raises
disrupts nothing."""

from __future__ import annotations

from typing import Any

import pytest
from tests.disruption import world as disruption_world

from karpy import rejections
from karpy.api import nodepool
from karpy.disruption import candidates
from karpy.kube import resources
from karpy.scheduling import scheduler

Reason = nodepool.DisruptionReason


def _unreadable_pod(w: disruption_world.World, name: str, node: str) -> None:
    """A pod karpy's parser refuses (a request that is no quantity), bound to `node`."""
    w.pod(name, node)
    obj: Any = w.kube.obj(resources.PODS, name, namespace="default")
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = [1]


async def test_a_node_with_a_pod_karpy_cannot_read_is_never_disrupted() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "100%"}])
    w.node("empty")
    w.node("looks-empty")  # its only pod cannot be read: not empty, not known
    _unreadable_pod(w, "mystery", "looks-empty")
    w.node("drifted", conditions=("Drifted",))
    _unreadable_pod(w, "mystery-2", "drifted")
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert [c.name for c in cmd.candidates] == ["empty"]
    await ctrl.queue.reconcile()
    assert w.deleting("empty")
    assert not w.deleting("looks-empty")
    assert await w.reconcile(ctrl) is None, "nothing else is ever a candidate while those pods stay unreadable"
    assert not w.deleting("drifted")
    (node,) = [n for n in w.cluster.state_nodes() if n.name == "looks-empty"]
    assert node.unreadable_pods == ("default/mystery",)
    blocked = {(e.name, e.message) for e in w.recorder.events if e.reason == "DisruptionBlocked"}
    assert ("looks-empty", "Pod default/mystery on the node cannot be read") in blocked


async def test_a_node_whose_evaluation_raises_is_left_out_and_the_others_disrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "100%"}])
    for name in ("a", "b", "c"):
        w.node(name)
    real = candidates.new_candidate

    def breaks_on_b(node: Any, **kwargs: Any) -> Any:
        if node.name == "b":
            raise ZeroDivisionError("a bug")
        return real(node, **kwargs)

    monkeypatch.setattr(candidates, "new_candidate", breaks_on_b)
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert sorted(c.name for c in cmd.candidates) == ["a", "c"]
    reported = {(r.kind, r.key, r.reason) for r in w.rejections.reports}
    assert reported == {("Node", "b", rejections.Reason.HANDLING_FAILED)}


def _raising_solver(_: scheduler.SchedulingInput) -> Any:
    raise ValueError("the solver broke")


async def test_a_simulation_that_raises_disrupts_nothing() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "100%"}])
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")  # consolidation would replace it with something smaller, if it could simulate
    w.node("drifted", conditions=("Drifted",))
    w.pod("q", "drifted", cpu="1")
    ctrl = w.controller(solver=_raising_solver)
    assert await w.reconcile(ctrl) is None
    assert not w.deleting("big")
    assert not w.deleting("drifted")
    assert [o["metadata"]["name"] for o in w.kube.all(resources.NODECLAIMS)] == ["big", "drifted"]
