"""Node auto repair: which condition makes a node unhealthy and when, the 20 % threshold, and the controller's
forceful delete, with cases after core's node/health suite (the AWS policies, since they are what users run)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests import builders
from tests.disruption import world as disruption_world
from tests.nodeclaim import harness

from karpy.api import decoding, labels
from karpy.cloudprovider.aws import repair as aws_repair
from karpy.kube import resources
from karpy.nodeclaim import repair, roles

AWS = aws_repair.REPAIR_POLICIES
MIN = 60.0


def timed(*conditions: tuple[str, str, float]) -> list[dict[str, str]]:
    """(type, status, lastTransitionTime) conditions."""
    return [builders.condition(t, s, lastTransitionTime=decoding.format_timestamp(at)) for t, s, at in conditions]


T = disruption_world.T0


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([("Ready", "True", T)], None),
        ([("Ready", "False", T)], ("Ready", T + 30 * MIN)),
        ([("Ready", "Unknown", T)], ("Ready", T + 30 * MIN)),
        ([("KernelReady", "True", T)], None),
        ([("KernelReady", "False", T)], ("KernelReady", T + 30 * MIN)),
        ([("AcceleratedHardwareReady", "False", T)], ("AcceleratedHardwareReady", T + 10 * MIN)),
        ([("StorageReady", "Unknown", T)], None),  # only False is unhealthy for the agent's conditions
        ([("SomethingElse", "False", T)], None),
        # Several: the one due first decides (the GPU fault outranks an older network fault).
        ([("NetworkingReady", "False", T), ("AcceleratedHardwareReady", "False", T + 5 * MIN)],
         ("AcceleratedHardwareReady", T + 15 * MIN)),
        ([("NetworkingReady", "False", T - 30 * MIN), ("AcceleratedHardwareReady", "False", T)],
         ("NetworkingReady", T)),
    ],
)  # fmt: skip
def test_unhealthy_by_the_aws_policies(
    conditions: Sequence[tuple[str, str, float]], expected: tuple[str, float] | None
) -> None:
    found = repair.unhealthy(builders.node("n", conditions=timed(*conditions)), AWS)
    assert (None if found is None else (found.condition_type, found.due)) == expected


@pytest.mark.parametrize(
    ("total", "sick", "healthy"),
    [(1, 1, True), (3, 1, True), (3, 2, False), (5, 1, True), (5, 2, False), (10, 2, True), (10, 3, False)],
)
def test_twenty_percent_rounded_up_may_be_unhealthy(total: int, sick: int, healthy: bool) -> None:
    nodes = [builders.node("n", conditions=timed(("Ready", "False" if i < sick else "True", T))) for i in range(total)]
    assert repair.pool_healthy(nodes, AWS) is healthy


def test_condition_names_become_upstreams_metric_labels() -> None:
    assert repair.snake_case("AcceleratedHardwareReady") == "accelerated_hardware_ready"
    assert repair.snake_case("Ready") == "ready"


class Recorded(harness.DisruptedLog, repair.Metrics):
    """Repair's metrics as calls: `calls` the claims disrupted, `unhealthy` the conditions counted."""

    def __init__(self) -> None:
        super().__init__()
        self.unhealthy: list[tuple[str, ...]] = []

    def unhealthy_disrupted(self, condition: str, nodepool: str, capacity_type: str, image_id: str) -> None:
        self.unhealthy.append((condition, nodepool, capacity_type, image_id))


def blocked(w: disruption_world.World, name: str) -> list[str]:
    return [e.reason for e in w.recorder.events if e.name == name and e.type == "Warning"]


def controller(w: disruption_world.World) -> tuple[repair.RepairController, Recorded]:
    seen = Recorded()
    deps = roles.ClusterRoles(client=w.kube, cluster=w.cluster, clock=w.clock)
    return repair.RepairController(deps, repair.Observer(w.recorder, seen), policies=AWS), seen


def set_condition(w: disruption_world.World, name: str, type_: str, status: str, at: float) -> None:
    obj = w.kube.objects[("nodes", "", name)]
    kept = [c for c in obj["status"]["conditions"] if c["type"] != type_]
    obj["status"]["conditions"] = [
        *kept,
        {"type": type_, "status": status, "lastTransitionTime": decoding.format_timestamp(at)},
    ]


async def test_a_node_unhealthy_past_its_toleration_is_deleted_forcefully() -> None:
    w = disruption_world.World()
    w.pool()
    for name in ("a", "b", "c", "d", "e"):
        w.node(name)
    now = w.clock.now()
    set_condition(w, "a", "KernelReady", "False", now - 10 * MIN)
    w.sync()
    ctrl, seen = controller(w)
    # Twenty minutes short of its toleration: nothing yet, and the next pass is due when it runs out.
    assert await ctrl.reconcile() == pytest.approx(repair.POLL)
    assert not w.deleting("a")
    w.clock.advance(20 * MIN)
    await ctrl.reconcile()
    assert w.deleting("a")
    claim = w.kube.obj(resources.NODECLAIMS, "a") or {}
    stamp = claim["metadata"]["annotations"][labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP]
    assert decoding.timestamp(stamp) == pytest.approx(w.clock.now(), abs=1)
    assert not any(w.deleting(n) for n in "bcde")
    assert seen.calls == [("unhealthy", "default", "on-demand")]
    assert seen.unhealthy == [("kernel_ready", "default", "on-demand", "")]


async def test_the_next_pass_is_due_when_the_soonest_toleration_runs_out() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    set_condition(w, "a", "AcceleratedHardwareReady", "False", w.clock.now() - (10 * MIN - 4))
    w.sync()
    ctrl, _ = controller(w)
    assert await ctrl.reconcile() == pytest.approx(4)


async def test_no_repair_while_more_than_twenty_percent_of_the_pool_is_unhealthy() -> None:
    w = disruption_world.World()
    w.pool()
    w.pool("other")
    for name in ("a", "b", "c", "d", "e"):
        w.node(name)
    w.node("x", pool="other")
    long_ago = w.clock.now() - 60 * MIN
    set_condition(w, "a", "Ready", "False", long_ago)
    set_condition(w, "b", "Ready", "Unknown", long_ago)
    set_condition(w, "x", "Ready", "False", long_ago)  # alone in its pool: one of one may be repaired
    w.sync()
    ctrl, seen = controller(w)
    await ctrl.reconcile()
    assert not w.deleting("a")
    assert not w.deleting("b")
    assert w.deleting("x")
    assert blocked(w, "a") == [repair.NODE_REPAIR_BLOCKED]
    assert blocked(w, "b") == [repair.NODE_REPAIR_BLOCKED]
    # Blocked repairs are tried again after five minutes; the event is not repeated within fifteen.
    await ctrl.reconcile()
    w.clock.advance(repair.BLOCKED_RETRY)
    await ctrl.reconcile()
    assert blocked(w, "a") == [repair.NODE_REPAIR_BLOCKED]
    # One recovers: one unhealthy node of five is within the threshold, and it is repaired at the next retry.
    set_condition(w, "b", "Ready", "True", w.clock.now())
    w.sync()
    w.clock.advance(repair.BLOCKED_RETRY)
    await ctrl.reconcile()
    assert w.deleting("a")
    assert [d[0] for d in seen.calls] == ["unhealthy", "unhealthy"]


async def test_an_earlier_termination_timestamp_is_kept() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("a")
    earlier = decoding.format_timestamp(w.clock.now() - 5 * MIN)
    w.kube.objects[("nodeclaims", "", "a")]["metadata"]["annotations"][
        labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
    ] = earlier
    set_condition(w, "a", "Ready", "False", w.clock.now() - 31 * MIN)
    w.sync()
    ctrl, _ = controller(w)
    await ctrl.reconcile()
    claim = w.kube.obj(resources.NODECLAIMS, "a") or {}
    assert claim["metadata"]["annotations"][labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP] == earlier
    assert w.deleting("a")


def standalone(w: disruption_world.World, name: str) -> None:
    """A node whose NodeClaim belongs to no NodePool (created by hand)."""
    w.node(name)
    for plural in ("nodeclaims", "nodes"):
        del w.kube.objects[(plural, "", name)]["metadata"]["labels"][labels.LABEL_NODEPOOL]


@pytest.mark.parametrize(("sick_in_pool", "repaired"), [(0, True), (2, False)])
async def test_a_standalone_nodeclaim_is_held_to_the_clusters_share(sick_in_pool: int, repaired: bool) -> None:
    w = disruption_world.World()
    w.pool()
    for name in ("a", "b", "c", "d", "e"):
        w.node(name)
    standalone(w, "solo")
    long_ago = w.clock.now() - 60 * MIN
    for name in ("solo", *"ab"[:sick_in_pool]):
        set_condition(w, name, "Ready", "False", long_ago)
    w.sync()
    ctrl, _ = controller(w)
    await ctrl.reconcile()
    # One sick node of six is within 20 % of the cluster (two, rounded up); three are not.
    assert w.deleting("solo") is repaired
    if not repaired:
        assert blocked(w, "solo") == [repair.NODE_REPAIR_BLOCKED]
