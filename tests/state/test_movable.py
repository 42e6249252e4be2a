"""Which pods of a leaving node can move now (`karpy.state.movable`), and the state nodes that carry the answer.

Cases ported from core: pkg/utils/pdb/suite_test.go `Describe("IsCurrentlyReschedulable")` (kubernetes-sigs/karpenter
#2033), each naming the upstream case; the rest cover the edges of upstream's `IsEvictable`/`IsDisruptable` it uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests import builders

from karpy.api import labels
from karpy.clock import ManualClock
from karpy.kube import client, resources
from karpy.scheduling import pods
from karpy.state import cluster, movable

NOW = 1_700_000_000.0
APP = {"pdb-test": "value"}
DND = labels.ANNOTATION_DO_NOT_DISRUPT


def _stays(pod: Mapping[str, Any], *pdbs: Mapping[str, Any]) -> bool:
    return movable.stays(pods.from_manifest(pod), pod, movable.budgets(pdbs), now=NOW)


def _running(*, started: str | None = None, **fields: Any) -> dict[str, Any]:
    obj = builders.ready(builders.pod("p", labels=APP, node="n", **fields))
    if started is not None:
        obj["status"]["startTime"] = started
    return obj


def _not_ready(obj: dict[str, Any]) -> dict[str, Any]:
    obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return obj


# upstream: DescribeTable("pods which are not currently reschedulable due to PDBs")
@pytest.mark.parametrize(
    "spec",
    [{"minAvailable": "100%"}, {"maxUnavailable": "0%"}, {"maxUnavailable": 0}],
    ids=["100% min available", "0% max unavailable", "0 max unavailable"],
)
def test_a_fully_blocking_pdb_holds_the_pod(spec: dict[str, Any]) -> None:
    assert _stays(_running(), builders.pdb("pdb", APP, **spec))


# upstream: "considers pod as currently reschedulable when no PDBs match"
def test_a_pdb_selecting_other_pods_holds_nothing() -> None:
    assert not _stays(_running(), builders.pdb("pdb", {"other": "value"}, maxUnavailable=0))


def test_a_pdb_of_another_namespace_holds_nothing() -> None:
    assert not _stays(_running(), builders.pdb("pdb", APP, namespace="elsewhere", maxUnavailable=0))


# upstream: "does not consider pod with do-not-disrupt annotation as currently reschedulable"
def test_do_not_disrupt_holds_the_pod() -> None:
    assert _stays(_running(annotations={DND: "true"}))


def test_a_do_not_disrupt_duration_holds_only_while_it_runs() -> None:
    assert _stays(_running(annotations={DND: "10m"}, started="2023-11-14T22:08:20Z"))  # NOW − 5 min
    assert not _stays(_running(annotations={DND: "1m"}, started="2023-11-14T22:08:20Z"))


# upstream: "considers unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is set to always allow"
def test_an_unhealthy_pod_moves_when_the_pdb_always_allows_unhealthy_evictions() -> None:
    pdb = builders.pdb("pdb", APP, minAvailable="100%", unhealthyPodEvictionPolicy="AlwaysAllow")
    assert not _stays(_not_ready(_running()), pdb)
    assert _stays(_running(), pdb)  # a healthy one is still held


# upstream: "does not consider unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is not set"
def test_an_unhealthy_pod_is_held_without_the_always_allow_policy() -> None:
    assert _stays(_not_ready(_running()), builders.pdb("pdb", APP, minAvailable="100%"))


def test_a_pdb_that_allows_nothing_now_but_could_later_does_not_hold_the_pod() -> None:
    """Upstream holds only for fully blocking PDBs: one at its minimum now lets an eviction through once the
    replacement it waits for is Ready, so the replacement must be provisioned."""
    pdb = builders.pdb("pdb", APP, minAvailable=1, status={"disruptionsAllowed": 0})
    assert not _stays(_running(), pdb)


def test_two_pdbs_selecting_the_pod_hold_it() -> None:
    """The Eviction API refuses a pod more than one PDB selects (core: pdb.go isEvictable)."""
    assert _stays(_running(), builders.pdb("a", APP, minAvailable=1), builders.pdb("b", APP, minAvailable=1))


def test_a_terminating_pod_is_never_held() -> None:
    """Not active: neither its annotation nor a PDB keeps it (a StatefulSet's is rescheduled while it goes)."""
    pod = builders.deleting(_running(annotations={DND: "true"}))
    assert not _stays(pod, builders.pdb("pdb", APP, maxUnavailable=0))


def test_a_pod_tolerating_the_disrupted_taint_is_not_held_by_a_pdb() -> None:
    """The drain does not evict it, so no PDB is asked (core: utils/pod IsEvictable)."""
    toleration = {"key": labels.TAINT_DISRUPTED_KEY, "operator": "Exists", "effect": "NoSchedule"}
    assert not _stays(_running(tolerations=[toleration]), builders.pdb("pdb", APP, maxUnavailable=0))


@pytest.mark.parametrize(
    "spec",
    [{"maxUnavailable": 1}, {"maxUnavailable": "10%"}, {"minAvailable": "99%"}, {"minAvailable": 0}],
)
def test_other_budgets_are_not_fully_blocking(spec: dict[str, Any]) -> None:
    assert not movable.fully_blocking(spec)


def test_a_pdb_without_a_usable_selector_selects_nothing() -> None:
    nil = builders.pdb("pdb", APP, maxUnavailable=0)
    del nil["spec"]["selector"]
    bad = builders.pdb("bad", {"matchExpressions": [{"key": "a", "operator": "Gt"}]}, match_labels=False)
    assert movable.budgets([nil, bad]) == []


def _state() -> cluster.Cluster:
    state = cluster.Cluster(clock=ManualClock(NOW))
    state.apply(resources.NODES, client.WatchEvent(client.ADDED, builders.node("n")))
    for name, extra in (("free", {}), ("guarded", {"annotations": {DND: "true"}})):
        pod = builders.ready(builders.pod(name, node="n", labels={"app": name}, **extra))
        state.apply(resources.PODS, client.WatchEvent(client.ADDED, pod))
    return state


def test_only_a_leaving_state_node_says_which_pods_it_holds() -> None:
    state = _state()
    state.apply(resources.PDBS, client.WatchEvent(client.ADDED, builders.pdb("free", {"app": "free"}, minAvailable=1)))
    assert [n.held for n in state.state_nodes()] == [frozenset()]
    state.mark_for_deletion("n")
    assert [n.held for n in state.state_nodes()] == [frozenset({"default/guarded"})]
    state.apply(resources.PDBS, client.WatchEvent(client.ADDED, builders.pdb("all", {"app": "free"}, maxUnavailable=0)))
    assert [n.held for n in state.state_nodes()] == [frozenset({"default/free", "default/guarded"})]
