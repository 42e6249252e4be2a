"""Static NodePools (`spec.replicas`): counting, scale up and down to the replicas, the scale-down order, and
drift's one-for-one replacement; cases after core's static/provisioning, static/deprovisioning and staticdrift
suites, on the real state cache with the in-memory API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tests import builders
from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool, parse
from karpy.disruption import methods
from karpy.kube import resources
from karpy.provisioning import nodeclaim_builder
from karpy.scheduling import results
from karpy.state import nodepoolstate
from karpy.static import controller as static_controller
from karpy.static import deprovisioning, provisioning

Reason = nodepool.DisruptionReason


def static_pool(
    w: disruption_world.World, replicas: int, *, nodes_limit: int | None = None, budget: str = "100%"
) -> None:
    body = builders.nodepool("static", uid="uid-static", **disruption_world.pool_fields(budgets=[{"nodes": budget}]))
    body["spec"]["replicas"] = replicas
    if nodes_limit is not None:
        body["spec"]["limits"] = {"nodes": str(nodes_limit)}
    w.kube.put(resources.NODEPOOLS, body)


class Creator:
    """What the provisioner's `create_nodeclaims` does with a plan, minus limits and metrics: the real manifest."""

    def __init__(self, w: disruption_world.World) -> None:
        self.w = w
        self.plans: list[results.PlannedNodeClaim] = []

    async def __call__(
        self, plans: Sequence[results.PlannedNodeClaim], pools: Mapping[str, nodepool.NodePool]
    ) -> object:
        for plan in plans:
            self.plans.append(plan)
            body = nodeclaim_builder.build_nodeclaim(plan, pools[plan.nodepool])
            made = await self.w.kube.create(resources.NODECLAIMS, body)
            self.w.cluster.record_created(resources.NODECLAIMS, made)
        return None


def controller(w: disruption_world.World) -> tuple[static_controller.StaticPoolController, Creator]:
    creator = Creator(w)
    deps = static_controller.Deps(client=w.kube, cluster=w.cluster, clock=w.clock, create=creator)
    return static_controller.StaticPoolController(deps), creator


def static_claims(w: disruption_world.World) -> list[dict[str, Any]]:
    return [
        c
        for c in w.kube.all(resources.NODECLAIMS)
        if c["metadata"]["labels"].get(labels.LABEL_NODEPOOL) == "static" and not c["metadata"].get("deletionTimestamp")
    ]


async def test_scale_up_creates_the_missing_replicas_with_the_pools_requirements_only() -> None:
    w = disruption_world.World()
    static_pool(w, 3)
    w.node("s1", pool="static")
    w.sync()
    ctrl, creator = controller(w)
    assert await ctrl.reconcile("static") == static_controller.REQUEUE
    assert len(creator.plans) == 2
    new = [c for c in static_claims(w) if c["metadata"]["name"] != "s1"]
    assert len(new) == 2
    for claim in new:
        keys = {r["key"] for r in claim["spec"]["requirements"]}
        # The cloud provider picks the instance: no instance-type list is injected (core IsStaticNodeClaim).
        assert labels.LABEL_INSTANCE_TYPE not in keys
        assert labels.LABEL_CAPACITY_TYPE in keys
        assert claim["metadata"]["labels"][labels.LABEL_NODEPOOL] == "static"
        assert claim["spec"].get("resources", {}).get("requests", {}) == {}
    # The created claims count at once (in flight): a second pass creates nothing more.
    assert await ctrl.reconcile("static") == static_controller.REQUEUE
    assert len(creator.plans) == 2


async def test_scale_up_stops_at_the_node_limit() -> None:
    w = disruption_world.World()
    static_pool(w, 5, nodes_limit=3)
    w.node("s1", pool="static")
    w.sync()
    ctrl, creator = controller(w)
    await ctrl.reconcile("static")
    assert len(creator.plans) == 2
    assert len(static_claims(w)) == 3


async def test_dynamic_pools_and_unsynced_state_are_left_alone() -> None:
    w = disruption_world.World()
    w.pool()
    static_pool(w, 2)
    ctrl, creator = controller(w)
    for res in disruption_world.SYNCED:  # objects arrive, but no list has completed yet
        for obj in w.kube.all(res):
            w.cluster.record_created(res, obj)
    assert await ctrl.reconcile("static") == static_controller.SYNC_RETRY
    w.sync()
    assert await ctrl.reconcile("default") is None
    assert await ctrl.reconcile("gone") is None
    assert not creator.plans


async def test_scale_down_takes_empty_nodes_before_busy_ones_and_busy_before_do_not_disrupt() -> None:
    w = disruption_world.World()
    static_pool(w, 1)
    for name in ("busy", "empty", "protected", "keep"):
        w.node(name, pool="static")
    w.pod("p-busy", "busy")
    w.pod("p-keep", "keep", priority=1_000_000_000)  # costlier to move than "busy"
    w.pod("p-protected", "protected", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    w.sync()
    ctrl, _ = controller(w)
    await ctrl.reconcile("static")
    assert sorted(c["metadata"]["name"] for c in static_claims(w)) == ["protected"]
    # Marked deleting in the state cache at once, before any watch event: the next pass counts them so.
    found = nodepoolstate.counts(nodepoolstate.pool_nodes(w.cluster.state_nodes(), "static"))
    assert found == nodepoolstate.Counts(active=1, deleting=3)


async def test_scale_down_takes_a_node_with_only_daemonset_pods_before_a_cheaper_busy_one() -> None:
    w = disruption_world.World()
    static_pool(w, 1)
    w.node("daemons", pool="static")
    w.node("busy", pool="static")
    for name in ("ds-1", "ds-2", "ds-3"):
        w.pod(name, "daemons")
        w.kube.objects[("pods", "default", name)]["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    w.pod("p-busy", "busy")
    w.sync()
    ctrl, _ = controller(w)
    await ctrl.reconcile("static")
    assert [c["metadata"]["name"] for c in static_claims(w)] == ["busy"]


def test_a_node_being_replaced_counts_as_pending_disruption() -> None:
    w = disruption_world.World()
    static_pool(w, 2)
    w.node("replaced", pool="static", conditions=("DisruptionReason",))
    w.node("kept", pool="static")
    w.sync()
    found = nodepoolstate.counts(nodepoolstate.pool_nodes(w.cluster.state_nodes(), "static"))
    assert found == nodepoolstate.Counts(active=1, pending=1)


def test_scale_down_order_takes_unlaunched_claims_first() -> None:
    w = disruption_world.World()
    static_pool(w, 0)
    w.node("launched", pool="static")
    w.node("unlaunched", pool="static")
    w.kube.objects[("nodeclaims", "", "unlaunched")]["status"]["providerID"] = ""
    w.kube.objects[("nodeclaims", "", "unlaunched")]["status"]["nodeName"] = ""
    w.sync()
    nodes = nodepoolstate.pool_nodes(w.cluster.state_nodes(), "static")
    order = deprovisioning.scale_down_order(nodes, {}, now=w.clock.now())
    assert [n.nodeclaim_name for n in order] == ["unlaunched", "launched"]


@pytest.mark.parametrize(
    ("replicas", "limit", "found", "expected"),
    [
        (3, None, nodepoolstate.Counts(active=1), 2),
        (3, None, nodepoolstate.Counts(active=1, pending=1), 1),  # a node being replaced still counts
        (3, None, nodepoolstate.Counts(active=1, deleting=5), 2),  # deleting ones do not
        (3, 4, nodepoolstate.Counts(active=1, deleting=2), 1),  # but hold nodes against the limit
        (3, 2, nodepoolstate.Counts(active=2, deleting=1), 0),
        (1, None, nodepoolstate.Counts(active=3), 0),
    ],
)
def test_to_create(replicas: int, limit: int | None, found: nodepoolstate.Counts, expected: int) -> None:
    body = builders.nodepool("static", uid="uid-static", **disruption_world.pool_fields())
    body["spec"]["replicas"] = replicas
    if limit is not None:
        body["spec"]["limits"] = {"nodes": str(limit)}
    assert provisioning.to_create(parse.nodepool(body), found) == expected


async def test_drift_replaces_a_static_node_one_for_one() -> None:
    w = disruption_world.World()
    static_pool(w, 2, budget="1")
    w.node("a", pool="static", conditions=("Drifted",))
    w.node("b", pool="static", conditions=("Drifted",))
    ctrl = w.controller()
    cmd = await w.reconcile(ctrl)
    assert cmd is not None
    assert (cmd.method, cmd.reason) == ("static-drift", Reason.DRIFTED)
    assert [c.name for c in cmd.candidates] == ["a"]
    (plan,) = cmd.replacements
    assert plan.static
    assert not plan.instance_type_options
    assert not plan.pods
    (replacement,) = [c for c in static_claims(w) if c["metadata"]["name"] not in ("a", "b")]
    assert labels.LABEL_INSTANCE_TYPE not in {r["key"] for r in replacement["spec"]["requirements"]}
    assert await w.reconcile(ctrl) is None  # the budget of one is in use


async def test_static_nodes_are_never_consolidated_and_drift_waits_for_scale_down() -> None:
    w = disruption_world.World()
    static_pool(w, 1)
    w.node("a", pool="static", conditions=("Consolidatable", "Drifted"))
    w.node("b", pool="static", conditions=("Consolidatable",))
    ctrl = w.controller()
    # Two active nodes for one replica: scale-down goes first; both are empty yet emptiness leaves them alone.
    assert await w.reconcile(ctrl) is None
    w.sync()
    ctx = await ctrl.context()
    assert ctx.static_counts["static"] == nodepoolstate.Counts(active=2)
    assert methods.StaticDrift().compute(ctx) is None
    assert methods.Emptiness().compute(ctx) is None
