"""Watch-event reactions: provisioning triggers and lifecycle metrics (table tests of the pure decisions), the
listener's leader gating, the provisioner's launch-aware `synced()`, and the termination controller's hook."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy import clock
from karpy.api import labels
from karpy.kube import client, resources
from karpy.runtime import observers
from karpy.state import cluster as state_cluster

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
DISRUPTED = {"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}
DELETING = "2023-11-14T22:13:20Z"


WEB = builders.pod("web", uid="uid-web")
UNSCHEDULABLE_WEB = builders.unschedulable(WEB)
BOUND_WEB = builders.unschedulable(builders.pod("web", uid="uid-web", node="n1"))  # bound but not yet updated
CLAIM = builders.nodeclaim("default-x", labels={labels.LABEL_CAPACITY_TYPE: "spot", labels.LABEL_ZONE: "us-east-1a"})
DELETING_CLAIM = builders.deleting(CLAIM)
N1 = builders.node("n1", taints=())


def registered(claim: dict[str, Any], status: str) -> dict[str, Any]:
    """A copy of `claim` whose Registered condition has `status`."""
    return dict(claim, status={"conditions": [builders.condition("Registered", status)]})


@pytest.mark.parametrize(
    ("res", "old", "new", "expected"),
    [
        (resources.PODS, None, UNSCHEDULABLE_WEB, "uid-web"),  # new and unschedulable
        (resources.PODS, WEB, UNSCHEDULABLE_WEB, "uid-web"),  # became unschedulable
        (
            resources.PODS,
            UNSCHEDULABLE_WEB,
            builders.unschedulable(builders.pod("web", uid="uid-web", node="n1")),
            None,
        ),  # bound
        (resources.PODS, None, builders.deleting(UNSCHEDULABLE_WEB), None),  # leaving
        (resources.PODS, UNSCHEDULABLE_WEB, None, None),  # gone
        (resources.NODECLAIMS, CLAIM, DELETING_CLAIM, "nodeclaim/default-x"),  # deletion starts
        (resources.NODECLAIMS, None, DELETING_CLAIM, "nodeclaim/default-x"),  # first seen deleting
        (resources.NODECLAIMS, DELETING_CLAIM, DELETING_CLAIM, None),  # already known
        (resources.NODECLAIMS, CLAIM, registered(CLAIM, "True"), None),  # other changes
        (resources.NODES, N1, builders.deleting(N1), "node/n1"),
        (resources.NODES, N1, builders.node("n1", taints=[DISRUPTED]), "node/n1"),  # disruption taints it first
        (resources.NODES, builders.node("n1", taints=[DISRUPTED]), builders.node("n1", taints=[DISRUPTED]), None),
        (resources.NODES, N1, builders.node("n1", taints=[{"key": "other", "effect": "NoSchedule"}]), None),
        (resources.NODES, builders.deleting(N1), None, None),
        (resources.NODEPOOLS, None, {"metadata": {"name": "default"}}, None),
    ],
)
def test_provisioning_triggers(
    res: resources.Resource, old: dict[str, Any] | None, new: dict[str, Any] | None, expected: str | None
) -> None:
    assert observers.provisioning_trigger(res, old, new) == expected


def test_a_nodeclaim_that_is_gone_counts_with_its_labels() -> None:
    gone = observers.nodeclaim_gone(resources.NODECLAIMS, DELETING_CLAIM, None)
    assert gone == observers.NodeClaimGone(nodepool="default", capacity_type="spot", zone="us-east-1a")
    assert observers.nodeclaim_gone(resources.NODECLAIMS, None, CLAIM) is None
    assert observers.nodeclaim_gone(resources.NODECLAIMS, CLAIM, DELETING_CLAIM) is None
    assert observers.nodeclaim_gone(resources.NODES, N1, None) is None


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (registered(CLAIM, "Unknown"), registered(CLAIM, "True"), "default"),
        (None, registered(CLAIM, "True"), "default"),  # first seen registered (e.g. a relist)
        (registered(CLAIM, "True"), registered(CLAIM, "True"), None),  # already counted
        (CLAIM, registered(CLAIM, "False"), None),
        (registered(CLAIM, "True"), None, None),
    ],
)
def test_node_created_when_a_claim_turns_registered(
    old: dict[str, Any] | None, new: dict[str, Any] | None, expected: str | None
) -> None:
    assert observers.node_registered(resources.NODECLAIMS, old, new) == expected


class Recorded:
    def __init__(self, *, leading: bool) -> None:
        self.leading = leading
        self.triggers: list[str] = []
        self.terminated: list[observers.NodeClaimGone] = []
        self.created: list[str] = []

    def hooks(self) -> observers.Hooks:
        return observers.Hooks(
            trigger=self.triggers.append,
            nodeclaim_terminated=self.terminated.append,
            node_created=lambda pool, _zone: self.created.append(pool),
            leading=lambda: self.leading,
        )


def test_only_the_leader_reacts() -> None:
    leader, follower = Recorded(leading=True), Recorded(leading=False)
    for recorded in (leader, follower):
        observe = observers.Observer(recorded.hooks())
        observe(resources.PODS, None, UNSCHEDULABLE_WEB)
        observe(resources.NODECLAIMS, CLAIM, registered(CLAIM, "True"))
        observe(resources.NODECLAIMS, registered(CLAIM, "True"), registered(DELETING_CLAIM, "True"))
        observe(resources.NODECLAIMS, DELETING_CLAIM, None)
    assert leader.triggers == ["uid-web", "nodeclaim/default-x"]
    assert leader.created == ["default"]
    assert [g.nodepool for g in leader.terminated] == ["default"]
    assert (follower.triggers, follower.created, follower.terminated) == ([], [], [])


def test_the_provisioner_waits_for_in_flight_launches() -> None:
    cluster = state_cluster.Cluster(clock=clock.ManualClock(nodeclaim_builders.T0))
    for res in (resources.NODECLAIMS, resources.NODES, resources.PODS):
        cluster.mark_listed(res)
    assert cluster.synced()
    assert cluster.synced_for_decisions()
    cluster.apply(resources.NODECLAIMS, client.WatchEvent("ADDED", nodeclaim_builders.claim_dict("default-a")))
    assert cluster.synced()  # informers (readiness, metrics) are unaffected
    assert not cluster.synced_for_decisions()  # but the provisioner must not plan around a claim with no capacity yet
    launched = nodeclaim_builders.claim_dict("default-a", status={"providerID": "fake:///i-1"})
    cluster.apply(resources.NODECLAIMS, client.WatchEvent("MODIFIED", launched))
    assert cluster.synced_for_decisions()
    cluster.apply(
        resources.NODECLAIMS,
        client.WatchEvent(
            "ADDED", nodeclaim_builders.claim_dict("default-b", deleted=nodeclaim_builders.ts(nodeclaim_builders.T0))
        ),
    )
    assert cluster.synced_for_decisions()  # a claim deleted before its launch never launches: nothing to wait for


async def test_termination_reports_the_released_node_with_its_nodepool() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict("default-abc12", pool="batch"))
    claims = env.claims()
    await claims.reconcile("default-abc12")
    raw = env.claim_obj("default-abc12")
    assert raw is not None
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict("n1", provider_id=raw["status"]["providerID"]))  # type: ignore[index]
    await claims.reconcile("default-abc12")  # registration puts the nodepool label and finalizer on the Node
    stored = env.kube.obj(resources.NODES, "n1")
    assert stored is not None
    stored["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    env.cloud.instances.clear()  # the instance is gone: the finalizer is released at once
    terminator = env.terminator()
    await env.kube.delete(resources.NODES, "n1")
    await terminator.reconcile("n1")
    assert env.kube.obj(resources.NODES, "n1") is None
    assert [pool for pool, _zone in env.terminated.nodes] == ["batch"]


def timed_pod(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    """A pod created at 22:13:20 with (type, status, lastTransitionTime) conditions."""
    timed = [builders.condition(t, s, lastTransitionTime=at) for t, s, at in conditions]
    return builders.pod("web", created="2023-11-14T22:13:20Z", status={"conditions": timed})


PENDING = ("PodScheduled", "False", "2023-11-14T22:13:20Z")
BOUND = ("PodScheduled", "True", "2023-11-14T22:14:05Z")
READY = ("Ready", "True", "2023-11-14T22:15:00Z")


@pytest.mark.parametrize(
    ("old", "new", "condition", "expected"),
    [
        (timed_pod(PENDING), timed_pod(BOUND), "PodScheduled", 45.0),  # bound 45 s after creation
        (None, timed_pod(BOUND), "PodScheduled", 45.0),  # first seen bound (e.g. after a restart)
        (timed_pod(BOUND), timed_pod(BOUND, READY), "PodScheduled", None),  # already bound: counted once
        (timed_pod(BOUND), timed_pod(BOUND, READY), "Ready", 100.0),
        (timed_pod(PENDING), timed_pod(PENDING), "PodScheduled", None),
        (timed_pod(PENDING), None, "PodScheduled", None),  # deleted
        (timed_pod(PENDING), timed_pod(("PodScheduled", "True", "not a time")), "PodScheduled", None),
    ],
)
def test_pod_bound_and_startup_durations_from_condition_times(
    old: dict[str, Any] | None, new: dict[str, Any] | None, condition: str, expected: float | None
) -> None:
    assert observers.pod_condition_age(resources.PODS, old, new, condition) == expected


def test_the_leader_observes_pod_durations() -> None:
    bound: list[float] = []
    started: list[float] = []
    hooks = observers.Hooks(
        trigger=lambda _key: None,
        nodeclaim_terminated=lambda _gone: None,
        node_created=lambda _pool, _zone: None,
        leading=lambda: True,
        pod_bound=bound.append,
        pod_started=started.append,
    )
    observers.Observer(hooks)(resources.PODS, timed_pod(PENDING), timed_pod(BOUND, READY))
    assert (bound, started) == ([45.0], [100.0])
