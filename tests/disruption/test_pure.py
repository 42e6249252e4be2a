"""Table tests for the pure layers: budget math, eviction/disruption costs and ordering, PDB blockers, conditions."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tests import builders
from tests.disruption import world as disruption_world

from karpy.api import labels, nodepool, parse
from karpy.disruption import blockers, budgets, candidates
from karpy.kube import resources
from karpy.nodeclaim import disruption_conditions

Reason = nodepool.DisruptionReason
T0 = disruption_world.T0
DND = labels.ANNOTATION_DO_NOT_DISRUPT
NS = builders.NS


running = functools.partial(builders.pod, phase="Running")


@pytest.mark.parametrize(
    ("annotations", "priority", "expected"),
    [
        ({}, None, 1.0),
        ({candidates.POD_DELETION_COST: str(2**27)}, None, 2.0),
        ({}, 2**25, 2.0),
        ({}, 2**30, 10.0),  # clamped high
        ({candidates.POD_DELETION_COST: str(-(2**31))}, None, -10.0),  # clamped low
        ({candidates.POD_DELETION_COST: "cheap"}, None, 1.0),  # unreadable: no cost
        ({candidates.POD_DELETION_COST: ""}, None, 1.0),
    ],
)
def test_eviction_cost(annotations: dict[str, str], priority: int | None, expected: float) -> None:
    spec = {} if priority is None else {"priority": priority}
    assert candidates.eviction_cost(candidates.pod_info(running(annotations=annotations, **spec), now=T0)) == expected


@pytest.mark.parametrize(
    ("pod", "do_not_disrupt", "reschedulable"),
    [
        (running(annotations={DND: "true"}), True, True),
        (running(annotations={DND: "false"}), False, True),
        (running(annotations={DND: "junk"}), False, True),
        # the duration form (core: IsDoNotDisruptActive): that long after the pod started, for ever until it has
        (running(annotations={DND: "10m"}, started=disruption_world.ts(T0 - 599)), True, True),
        (running(annotations={DND: "10m"}, started=disruption_world.ts(T0 - 600)), False, True),
        (running(annotations={DND: "1h30m"}, started=disruption_world.ts(T0 - 3600)), True, True),
        (running(annotations={DND: "10m"}), True, True),  # not started yet: fail safe
        (running(annotations={DND: "0s"}), False, True),  # not a positive duration: ignored
        (running(annotations={DND: "true"}, phase="Succeeded"), False, False),  # terminal pods block nothing
        (running(annotations={DND: "10m"}, phase="Failed"), False, False),
        (
            builders.deleting(running(annotations={DND: "true"}), at="2024-01-01T00:00:00Z"),
            False,
            False,
        ),
        (running(owners=[{"kind": "DaemonSet", "controller": True}]), False, False),
        (running(owners=[{"kind": "Node", "controller": True}]), False, False),  # a mirror pod
        (running(owners=[{"kind": "DaemonSet"}]), False, True),  # not its controller
        (running(annotations={DND: "true"}, phase="Pending"), True, True),
        (running(annotations={"kubernetes.io/config.mirror": "x"}), False, False),
    ],
)
def test_pod_info_do_not_disrupt_forms(pod: dict[str, Any], do_not_disrupt: bool, reschedulable: bool) -> None:
    info = candidates.pod_info(pod, now=T0)
    assert (info.do_not_disrupt, info.reschedulable) == (do_not_disrupt, reschedulable)


def test_reschedule_cost_and_emptiness_ignore_daemons_and_negative_costs() -> None:
    daemon = candidates.pod_info(running(owners=[{"kind": "DaemonSet", "controller": True}]), now=T0)
    cheap = candidates.pod_info(running(annotations={candidates.POD_DELETION_COST: str(-(2**30))}), now=T0)
    assert candidates.reschedule_disruption_cost([daemon]) == 1.0  # only daemons: empty
    assert candidates.reschedule_disruption_cost([cheap]) == 1.0  # negative costs count as 0
    assert candidates.reschedule_disruption_cost([candidates.pod_info(running(), now=T0)]) == 2.0


@pytest.mark.parametrize(
    ("pdbs", "blocked"),
    [
        ([], False),
        ([{"sel": {"app": "a"}, "allowed": 1}], False),
        ([{"sel": {"app": "a"}, "allowed": 0}], True),
        ([{"sel": {"app": "b"}, "allowed": 0}], False),
        ([{"sel": {"app": "a"}, "allowed": 1}, {"sel": {}, "allowed": 5}], True),  # two PDBs match
    ],
)
def test_pdb_blockers(pdbs: list[dict[str, Any]], blocked: bool) -> None:
    parsed = [
        candidates.pdb_from_manifest(
            {
                "metadata": {"name": f"pdb{i}", "namespace": "default"},
                "spec": {"selector": {"matchLabels": p["sel"]}},
                "status": {"disruptionsAllowed": p["allowed"]},
            }
        )
        for i, p in enumerate(pdbs)
    ]
    info = candidates.pod_info(running(labels={"app": "a"}), now=T0)
    assert (candidates.eviction_blocker(info, [p for p in parsed if p is not None]) is not None) == blocked


blocking_pdb = functools.partial(builders.pdb, "guard", match_labels=False, status={"disruptionsAllowed": 0})


@pytest.mark.parametrize(
    ("selector", "pod_labels", "selects"),
    [
        ({"matchLabels": {"app": "a"}}, {"app": "a"}, True),
        ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, {"app": "b"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}, {"app": "b"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "b"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": "x"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"tier": "web"}, True),
        (
            {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            {"app": "a"},
            False,
        ),
        ({}, {"app": "a"}, True),  # an empty selector selects every pod of the namespace
    ],
)
def test_pdb_selectors(selector: dict[str, Any], pod_labels: dict[str, str], selects: bool) -> None:
    pdb = candidates.pdb_from_manifest(blocking_pdb(selector))
    assert pdb is not None
    assert (pdb.key, pdb.namespace, pdb.disruptions_allowed) == ("default/guard", "default", 0)
    info = candidates.pod_info(running(labels=pod_labels), now=T0)
    assert (candidates.eviction_blocker(info, [pdb]) is not None) is selects


@pytest.mark.parametrize(
    "selector",
    [
        None,  # a nil selector selects nothing in policy/v1
        {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]},
        {"matchExpressions": ["app=a"]},
    ],
)
def test_unusable_pdb_selectors_are_ignored(selector: Any) -> None:
    assert candidates.pdb_from_manifest(blocking_pdb(selector)) is None


@pytest.mark.parametrize(
    ("status", "allowed"),
    [({"disruptionsAllowed": 3}, 3), ({}, 0), ({"disruptionsAllowed": "3"}, 0), ({"disruptionsAllowed": None}, 0)],
)
def test_pdb_disruptions_allowed_defaults_to_none(status: dict[str, Any], allowed: int) -> None:
    """What the PDB controller has not computed yet allows nothing."""
    pdb = candidates.pdb_from_manifest(blocking_pdb({"matchLabels": {"app": "a"}}, status=status))
    assert pdb is not None
    assert pdb.disruptions_allowed == allowed


def test_a_pdb_guards_only_pods_of_its_namespace() -> None:
    pdb = candidates.pdb_from_manifest(blocking_pdb({}, namespace=None))
    assert pdb is not None
    assert pdb.namespace == ""
    assert candidates.eviction_blocker(candidates.pod_info(running(), now=T0), [pdb]) is None


def _world_nodes(w: disruption_world.World) -> list[Any]:
    w.sync()
    return w.cluster.state_nodes()


@pytest.mark.parametrize(
    ("budget", "nodes", "not_ready", "expected"),
    [
        ({"nodes": "10%"}, 10, 0, 1),
        ({"nodes": "10%"}, 11, 0, 2),  # percentages round up
        ({"nodes": "50%"}, 4, 1, 1),  # a NotReady node uses up budget
        ({"nodes": "0"}, 3, 0, 0),
        ({"nodes": "1", "reasons": ["Drifted"]}, 3, 0, 2**31 - 1),  # not for Empty
        ({"nodes": "0", "schedule": "0 0 1 1 *", "duration": "1h"}, 3, 0, 2**31 - 1),  # inactive schedule
    ],
)
def test_budget_mapping(budget: dict[str, Any], nodes: int, not_ready: int, expected: int) -> None:
    w = disruption_world.World()
    w.pool(budgets=[budget])
    for i in range(nodes):
        w.node(f"n{i}", ready=i >= not_ready)
    pools = [parse.nodepool(w.kube.obj(resources.NODEPOOLS, "default") or {})]
    got = budgets.budget_mapping(pools, _world_nodes(w), Reason.EMPTY, now=w.clock.now())
    assert got == {"default": expected}


def test_consolidatable_waits_for_consolidate_after() -> None:
    w = disruption_world.World()
    w.pool(after="10m")
    w.node("n0", conditions=())
    w.sync()
    claim = w.cluster.nodeclaim("n0")
    assert claim is not None
    pool = w.cluster.nodepools()[0]
    initialized_at = disruption_world.T0
    early = disruption_conditions.consolidatable(claim, pool, now=initialized_at + 60)
    assert not early.ready
    assert early.wait == 540
    assert disruption_conditions.consolidatable(claim, pool, now=initialized_at + 600).ready


def test_drift_by_hash_and_requirements() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0")
    w.sync()
    claim, pool = w.cluster.nodeclaim("n0"), w.cluster.nodepools()[0]
    assert claim is not None
    assert disruption_conditions.static_drift(claim, pool) is None
    w.pool(capacity_types=("spot",))  # requirements changed: not hashed, compared against labels
    w.sync()
    assert (
        disruption_conditions.static_drift(claim, w.cluster.nodepools()[0])
        == disruption_conditions.CoreDriftReason.REQUIREMENTS_DRIFTED
    )
    body = w.kube.obj(resources.NODEPOOLS, "default") or {}
    body["spec"]["template"]["spec"]["requirements"][0]["values"] = ["on-demand"]
    body["spec"]["template"]["spec"]["expireAfter"] = "24h"  # template field: hashed
    w.sync()
    assert (
        disruption_conditions.static_drift(claim, w.cluster.nodepools()[0])
        == disruption_conditions.CoreDriftReason.NODEPOOL_DRIFTED
    )


def test_a_pod_under_two_pdbs_names_both() -> None:
    pdbs = [candidates.pdb_from_manifest(blocking_pdb({}) | {"metadata": {"name": n, "namespace": NS}}) for n in "ab"]
    info = candidates.pod_info(running(), now=T0)
    assert candidates.eviction_blocker(info, [p for p in pdbs if p is not None]) == (
        blockers.several_pdbs("default/p", ["default/a", "default/b"])
    )


def test_an_uninitialized_claim_is_never_consolidatable() -> None:
    w = disruption_world.World()
    w.pool(after="0s")
    w.node("n0", conditions=())
    raw = w.kube.objects[("nodeclaims", "", "n0")]
    raw["status"]["conditions"] = [c for c in raw["status"]["conditions"] if c["type"] != "Initialized"]
    w.sync()
    claim = w.cluster.nodeclaim("n0")
    assert claim is not None
    verdict = disruption_conditions.consolidatable(claim, w.cluster.nodepools()[0], now=w.clock.now() + 3600)
    assert (verdict.ready, verdict.wait) == (False, None)


def test_a_claim_that_has_not_launched_sheds_a_drifted_condition() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n0", conditions=("Drifted",))
    raw = w.kube.objects[("nodeclaims", "", "n0")]
    raw["status"]["conditions"] = [c for c in raw["status"]["conditions"] if c["type"] != "Launched"]
    w.sync()
    claim = w.cluster.nodeclaim("n0")
    assert claim is not None
    out = disruption_conditions.with_disruption_conditions(
        claim, w.cluster.nodepools()[0], now=w.clock.now(), provider_drift="X"
    )
    assert "Drifted" not in [c.type for c in out]


A = {"app": "a"}


@pytest.mark.parametrize(
    ("annotations", "pdbs", "held"),
    [
        ({}, [], False),
        ({DND: "true"}, [], True),
        ({}, [(A, {"maxUnavailable": 0})], True),
        ({}, [(A, {"minAvailable": "100%"})], True),
        ({}, [(A, {"minAvailable": 1})], False),  # at its minimum now, free once a replacement is Ready
        ({}, [(A, {"minAvailable": 1}), (A, {"maxUnavailable": 1})], True),  # two PDBs: the Eviction API refuses
        ({}, [({"app": "b"}, {"maxUnavailable": 0})], False),
    ],
    ids=["free", "dnd", "max-unavailable-0", "min-available-100%", "at-minimum", "two-pdbs", "other-pods"],
)
def test_pods_drift_passes_but_buys_no_replacement_for(
    annotations: dict[str, str], pdbs: list[tuple[dict[str, str], dict[str, Any]]], held: bool
) -> None:
    """core: pkg/utils/pdb/pdb.go IsCurrentlyReschedulable, as disruption/helpers.go SimulateScheduling applies it."""
    parsed = [
        candidates.pdb_from_manifest(builders.pdb(f"pdb{i}", match, status={"disruptionsAllowed": 0}, **spec))
        for i, (match, spec) in enumerate(pdbs)
    ]
    info = candidates.pod_info(running(labels=A, annotations=annotations), now=T0)
    assert candidates.held(info, [p for p in parsed if p is not None]) is held
