"""The disruption controller's Unconsolidatable and DisruptionBlocked events carry the reason, on the Node and the
NodeClaim (and on a NodePool whose budget blocks outright), deduplicated per object as upstream's recorder does."""

from __future__ import annotations

from tests.disruption import world as disruption_world

from karpy.api import labels
from karpy.disruption import blockers, orchestration
from karpy.disruption import publisher as disruption_publisher
from karpy.kube import resources

BLOCKED, UNCONSOLIDATABLE = blockers.DISRUPTION_BLOCKED, blockers.UNCONSOLIDATABLE


def _about(w: disruption_world.World, reason: str) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for e in w.recorder.events:
        if e.reason == reason:
            out.setdefault((e.kind, e.name), []).append(e.message)
    return out


async def test_a_pdb_and_a_do_not_disrupt_pod_block_with_their_names() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("guarded")
    w.pod("web", "guarded", pod_labels={"app": "web"})
    w.pdb("web-pdb", {"app": "web"}, allowed=0)
    w.node("pinned")
    w.pod("batch", "pinned", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    w.node("annotated", node_annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    await w.reconcile(w.controller())
    blocked = _about(w, BLOCKED)
    pdb = ["PodDisruptionBudget default/web-pdb prevents evicting pod default/web"]
    pod = ['Pod default/batch has the "karpenter.sh/do-not-disrupt" annotation']
    node = ['Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation']
    assert blocked == {
        ("Node", "guarded"): pdb,
        ("NodeClaim", "guarded"): pdb,
        ("Node", "pinned"): pod,
        ("NodeClaim", "pinned"): pod,
        ("Node", "annotated"): node,
        ("NodeClaim", "annotated"): node,
    }


async def test_events_are_not_repeated_within_upstreams_dedupe_windows() -> None:
    w = disruption_world.World()
    w.pool(capacity_types=("spot",))
    w.node("s", itype="c8", capacity_type="spot")  # spot-to-spot is off: Unconsolidatable every pass
    w.pod("p", "s", cpu="5")  # too big for the other node: only a (spot) replacement could take it
    w.node("pinned")
    w.pod("batch", "pinned", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    ctrl = w.controller()
    await w.reconcile(ctrl)
    await w.reconcile(ctrl)  # 16 s later: inside both windows
    assert {k: len(v) for k, v in _about(w, UNCONSOLIDATABLE).items()} == {("Node", "s"): 1, ("NodeClaim", "s"): 1}
    assert len(_about(w, BLOCKED)[("Node", "pinned")]) == 1
    await w.clock.run_for(disruption_publisher.EVENT_DEDUPE)
    await w.reconcile(ctrl)  # DisruptionBlocked again, Unconsolidatable not yet (15 min)
    assert len(_about(w, BLOCKED)[("Node", "pinned")]) == 2
    assert len(_about(w, UNCONSOLIDATABLE)[("Node", "s")]) == 1
    await w.clock.run_for(disruption_publisher.UNCONSOLIDATABLE_DEDUPE)
    await w.reconcile(ctrl)
    assert len(_about(w, UNCONSOLIDATABLE)[("NodeClaim", "s")]) == 2


async def test_a_nodepool_whose_budget_allows_nothing_is_told_so() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}, {"nodes": "100%"}])
    w.node("n0")
    await w.reconcile(w.controller())
    assert _about(w, BLOCKED) == {
        ("NodePool", "default"): ["No allowed disruptions for disruption reason Underutilized due to blocking budget"]
    }


async def test_a_drifted_node_whose_pods_fit_nowhere_is_blocked() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("old", conditions=("Consolidatable", "Drifted"))
    w.pod("huge", "old", cpu="3")  # no other node; the replacement must launch, so this one fits (c4)
    w.pod("anchor", "old", cpu="1", affinity=_NOT_ON_A_NEW_NODE)
    assert await w.reconcile(w.controller()) is None
    blocked = _about(w, BLOCKED)
    assert set(blocked) == {("Node", "old"), ("NodeClaim", "old")}
    assert all(m.startswith("Not all pods would schedule, default/anchor => ") for ms in blocked.values() for m in ms)


_NOT_ON_A_NEW_NODE = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": labels.LABEL_HOSTNAME, "operator": "In", "values": ["old"]}]}
            ]
        }
    }
}


async def test_a_replacement_is_announced_launching_and_waiting_once_as_upstream_does() -> None:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "1"}])
    w.node("a", conditions=("Drifted",))
    w.pod("p1", "a", cpu="3")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is not None
    (replacement,) = [o["metadata"]["name"] for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] != "a"]
    assert _about(w, orchestration.DISRUPTION_LAUNCHING) == {
        ("NodeClaim", replacement): ["Launching NodeClaim: Drifted"]
    }
    await ctrl.queue.reconcile()
    await ctrl.queue.reconcile()  # still not initialized: told once, not on every pass
    waiting = {("NodeClaim", replacement): ["Waiting on readiness to continue disruption"]}
    assert _about(w, orchestration.DISRUPTION_WAITING_READINESS) == waiting
    assert [
        e.type for e in w.recorder.events if e.reason.startswith("DisruptionL") or e.reason.startswith("DisruptionW")
    ] == [
        "Normal",
        "Normal",
    ]
