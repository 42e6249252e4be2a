"""`karpenter.sh/do-not-disrupt: "<duration>"` on a pod holds its node out of every voluntary method for that long
after the pod started, then lets it go: emptiness (a DaemonSet pod's window), consolidation and drift without a
terminationGracePeriod, and static scale-down ranks such nodes last. A drift candidate whose NodeClaim has a
terminationGracePeriod is replaced anyway, as upstream's eventual class tolerates pod blockers. On the Node only
"true" counts (upstream `ValidateNodeDisruptable`)."""

from __future__ import annotations

from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool
from karpy.kube import resources

Reason = nodepool.DisruptionReason
DND = labels.ANNOTATION_DO_NOT_DISRUPT
MIN = 60.0


def protected(w: disruption_world.World, pod: str, node: str, *, window: str = "30m", cpu: str = "1") -> None:
    """A pod on `node` that started ten minutes ago and asks for `window` of protection."""
    w.pod(pod, node, cpu=cpu, annotations={DND: window}, started=w.clock.now() - 10 * MIN)


async def test_emptiness_waits_for_a_daemonset_pods_window() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    protected(w, "agent", "a")
    w.kube.objects[("pods", "default", "agent")]["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None  # 20 minutes of the window are left
    w.clock.advance(20 * MIN)
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.EMPTY, ["a"])


async def test_consolidation_waits_for_the_window() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.node("b")
    protected(w, "pa", "a")
    protected(w, "pb", "b", window="1h")
    ctrl = w.controller()
    assert await w.reconcile(ctrl) is None
    w.clock.advance(20 * MIN)  # "a"'s window is over, "b"'s is not
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert cmd.reason == Reason.UNDERUTILIZED
    assert [c.name for c in cmd.candidates] == ["a"]


async def test_drift_waits_for_the_window_unless_a_grace_period_bounds_it() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",))
    w.node("bounded", conditions=("Drifted",), tgp="1h")
    protected(w, "pa", "a", cpu="3")
    protected(w, "pb", "bounded", cpu="3")
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.DRIFTED, ["bounded"])
    w.clock.advance(20 * MIN)
    replacement = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] not in ("a", "bounded")]
    for claim in replacement:  # the first replacement settles, so the next pass may act again
        claim["status"] = {
            "providerID": "fake:///test-zone-1/i-new",
            "conditions": [disruption_world.cond("Initialized")],
        }
    await ctrl.queue.reconcile()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert (cmd.reason, [c.name for c in cmd.candidates]) == (Reason.DRIFTED, ["a"])


async def test_on_the_node_only_true_blocks() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("timed", node_annotations={DND: "30m"})
    w.node("forever", node_annotations={DND: "true"})
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert [c.name for c in cmd.candidates] == ["timed"]
