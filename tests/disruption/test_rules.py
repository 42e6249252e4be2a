"""Table tests of the rules that decide which nodes disruption may touch and how much it may take at once (pure):
node blockers, budget counting, candidate rejections, costs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests import builders
from tests.disruption import world as disruption_world
from tests.nodeclaim import builders as nodeclaim_builders

from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.disruption import blockers, budgets, candidates
from karpy.kube import resources
from karpy.state import statenode

T0 = disruption_world.T0
NOW = T0 + 3600


def _node(name: str = "n0", **claim_conditions: str) -> statenode.StateNode:
    """A synced, managed, initialized node of pool "default" (an extra claim condition per keyword)."""
    w = disruption_world.World()
    w.pool()
    w.node(name, conditions=tuple(claim_conditions))
    w.sync()
    (node,) = w.cluster.state_nodes()
    return node


def _with_node(node: statenode.StateNode, **changes: Any) -> statenode.StateNode:
    raw = dict(node.node or {})
    for key, value in changes.items():
        raw[key] = {**raw.get(key, {}), **value}
    return dataclasses.replace(node, node=raw)


BASE = _node()


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        (BASE, None),
        (dataclasses.replace(BASE, managed=False), blockers.not_managed()),
        (dataclasses.replace(BASE, nodeclaim=None), blockers.not_managed()),
        (dataclasses.replace(BASE, node=None), blockers.not_registered()),
        (dataclasses.replace(BASE, initialized=False), blockers.not_initialized()),
        (dataclasses.replace(BASE, marked_for_deletion=True), blockers.deleting()),
        (dataclasses.replace(BASE, deleting=True), blockers.deleting()),
        (dataclasses.replace(BASE, nominated_until=NOW + 1), blockers.nominated()),
        (dataclasses.replace(BASE, nominated_until=NOW), None),  # the nomination ran out just now
        (
            _with_node(BASE, metadata={"annotations": {labels.ANNOTATION_DO_NOT_DISRUPT: "true"}}),
            blockers.node_do_not_disrupt(),
        ),
        (_with_node(BASE, metadata={"annotations": {labels.ANNOTATION_DO_NOT_DISRUPT: "1h"}}), None),  # "true" only
    ],
)
def test_node_blockers(node: statenode.StateNode, reason: blockers.Blocker | None) -> None:
    assert candidates.node_blocker(node, now=NOW, queued=frozenset()) == reason


def test_a_node_already_queued_is_not_a_candidate_again() -> None:
    assert candidates.node_blocker(BASE, now=NOW, queued=frozenset({"n0"})) == blockers.in_progress()


NOT_READY = _with_node(BASE, status={"conditions": [{"type": "Ready", "status": "False"}]})
assert BASE.nodeclaim is not None
CLAIM_DELETING = dataclasses.replace(
    BASE,
    deleting=True,
    nodeclaim=dataclasses.replace(
        BASE.nodeclaim, metadata=dataclasses.replace(BASE.nodeclaim.metadata, deletion_timestamp=NOW)
    ),
)


@pytest.mark.parametrize(
    ("nodes", "total", "disrupting"),
    [
        ([BASE], 1, 0),
        ([NOT_READY], 1, 1),
        ([dataclasses.replace(BASE, marked_for_deletion=True)], 1, 1),
        ([CLAIM_DELETING], 1, 1),
        ([dataclasses.replace(BASE, deleting=True)], 1, 0),  # the Node alone deleting: its NodeClaim is not, yet
        ([dataclasses.replace(BASE, initialized=False), BASE], 1, 0),  # not yet a node of the pool's count
        ([dataclasses.replace(BASE, managed=False), BASE], 1, 0),
        ([dataclasses.replace(BASE, nodeclaim=None), BASE], 1, 0),  # a Node without its NodeClaim is not managed
        ([_node("n0", InstanceTerminating="True"), BASE], 1, 0),  # its instance is already going
        ([BASE, NOT_READY, BASE], 3, 1),
        ([NOT_READY, CLAIM_DELETING], 2, 2),
    ],
)
def test_budget_counts(nodes: list[statenode.StateNode], total: int, disrupting: int) -> None:
    assert budgets.counts(nodes) == ({"default": total}, {"default": disrupting} if disrupting else {})


@pytest.mark.parametrize(
    ("node", "ready"),
    [
        (None, False),
        ({"status": {}}, False),
        ({"status": {"conditions": ["Ready", {"type": "Ready", "status": "True"}]}}, True),
        ({"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}}, False),
        ({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, False),
    ],
)
def test_node_ready(node: dict[str, Any] | None, ready: bool) -> None:
    assert budgets.node_ready(node) is ready


def test_a_budget_is_computed_for_its_own_reason() -> None:
    budget_list = [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "1"}]
    pool = builders.parsed_nodepool(uid="uid-default", **disruption_world.pool_fields(budgets=budget_list))
    assert budgets.budget_mapping([pool], [BASE], nodepool.DisruptionReason.DRIFTED, now=NOW) == {"default": 0}
    assert budgets.budget_mapping([pool], [BASE], nodepool.DisruptionReason.EMPTY, now=NOW) == {"default": 1}


@pytest.mark.parametrize(
    ("expire_after", "created", "remaining"),
    [
        ("Never", T0, 1.0),
        ("0s", T0, 1.0),
        ("2h", NOW - 1800, 0.75),
        ("2h", NOW, 1.0),
        ("2h", NOW - 3 * 3600, 0.0),  # past its expiry: nothing left
        ("2h", NOW + 3600, 1.0),  # a clock behind the creation time: capped
        ("1s", NOW - 1, 0.0),  # a one-second expireAfter is a lifetime like any other
    ],
)
def test_lifetime_remaining(expire_after: str, created: float, remaining: float) -> None:
    claim = nodeclaim_builders.claim("c", expire_after=expire_after, created=nodeclaim_builders.ts(created))
    assert candidates.lifetime_remaining(claim, NOW) == remaining


def test_lifetime_remaining_without_a_creation_time() -> None:
    claim = nodeclaim_builders.claim("c", expire_after="2h", created=nodeclaim_builders.ts(NOW))
    bare = dataclasses.replace(claim, metadata=dataclasses.replace(claim.metadata, creation_timestamp=None))
    assert candidates.lifetime_remaining(bare, NOW) == 1.0


def test_the_cheapest_matching_offering_prices_the_node() -> None:
    offerings = [
        types.Offering(zone="z1", capacity_type="spot", price=0.3),
        types.Offering(zone="z1", capacity_type="spot", price=0.1),
        types.Offering(zone="z2", capacity_type="spot", price=0.01),
        types.Offering(zone="z1", capacity_type="on-demand", price=0.02),
    ]
    it = disruption_world.instance_type("c4", 4, 1.0)
    it = dataclasses.replace(it, offerings=tuple(offerings))
    node_labels = {labels.LABEL_ZONE: "z1", labels.LABEL_CAPACITY_TYPE: "spot"}
    found = candidates.find_offering(it, node_labels)
    assert found is not None
    assert found.price == 0.1
    assert candidates.find_offering(it, {labels.LABEL_ZONE: "z3", labels.LABEL_CAPACITY_TYPE: "spot"}) is None


def _infos(w: disruption_world.World) -> dict[str, candidates.PodInfo]:
    return {f"default/{o['metadata']['name']}": candidates.pod_info(o, now=NOW) for o in w.kube.all(resources.PODS)}


def _build(node: statenode.StateNode, **overrides: Any) -> candidates.Candidate | candidates.Rejection:
    kwargs: dict[str, Any] = {
        "pools": {"default": builders.parsed_nodepool(uid="uid-default", **disruption_world.pool_fields())},
        "instance_types": {"default": disruption_world.CATALOG_BY_NAME},
        "pod_infos": {},
        "pdbs": [],
        "disruption_class": candidates.DisruptionClass.GRACEFUL,
        "now": NOW,
    }
    return candidates.new_candidate(node, **{**kwargs, **overrides})


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"pools": {}}, blockers.nodepool_not_found("default")),
        ({"instance_types": {}}, blockers.instance_type_not_found("c4")),
        (
            {"instance_types": {"default": {"c8": disruption_world.CATALOG_BY_NAME["c8"]}}},
            blockers.instance_type_not_found("c4"),
        ),
    ],
)
def test_candidate_rejections_name_the_node_and_why(overrides: dict[str, Any], reason: blockers.Blocker) -> None:
    assert _build(BASE, **overrides) == candidates.Rejection(BASE, reason)


def test_a_node_in_a_zone_its_type_is_not_offered_in_is_rejected() -> None:
    moved = dataclasses.replace(BASE, labels={**BASE.labels, labels.LABEL_ZONE: "elsewhere"})
    assert _build(moved) == candidates.Rejection(moved, blockers.offering_not_found("c4"))


def test_a_blocked_node_is_rejected_with_its_blocker() -> None:
    deleting = dataclasses.replace(BASE, deleting=True)
    assert _build(deleting) == candidates.Rejection(deleting, blockers.deleting())


def test_a_candidate_carries_its_offering_pods_and_costs() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.pod("web", "n0", priority=2**25)
    w.sync()
    (node,) = w.cluster.state_nodes()
    found = _build(node, pod_infos=_infos(w))
    assert isinstance(found, candidates.Candidate)
    assert (found.name, found.node_name, found.zone, found.capacity_type, found.price) == (
        "n0",
        "n0",
        disruption_world.ZONE,
        "on-demand",
        0.20,
    )
    assert [p.key for p in found.pod_infos] == ["default/web"]
    assert [p.key for p in found.reschedulable_pods] == ["default/web"]
    assert found.reschedulable_pods[0].node_name == ""  # unbound: it is to be placed again
    # eviction cost 1 + priority 2^25 / 2^25, times the lifetime left: an hour of the default 720h expireAfter gone
    assert found.disruption_cost == pytest.approx(2.0 * 719 / 720)
    assert found.reschedule_cost == 3.0
    assert not found.is_empty


def test_a_pool_without_nodes_may_disrupt_none() -> None:
    pool = builders.parsed_nodepool(uid="uid-default", **disruption_world.pool_fields(budgets=[{"nodes": "100%"}]))
    assert budgets.budget_mapping([pool], [], nodepool.DisruptionReason.EMPTY, now=NOW) == {"default": 0}


def test_a_node_without_an_instance_type_label_is_rejected_by_name() -> None:
    unlabelled = dataclasses.replace(
        BASE, labels={k: v for k, v in BASE.labels.items() if k != labels.LABEL_INSTANCE_TYPE}
    )
    assert _build(unlabelled) == candidates.Rejection(unlabelled, blockers.instance_type_not_found(""))


def test_a_node_blocked_by_its_pods_is_rejected_with_the_pod() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.pod("pinned", "n0", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    w.sync()
    (node,) = w.cluster.state_nodes()
    assert _build(node, pod_infos=_infos(w)) == candidates.Rejection(
        node, blockers.pod_do_not_disrupt("default/pinned")
    )
