"""operatorpkg's status-condition and termination series, fed by the state cache's watch updates and read from it at
scrape time (operatorpkg: status/controller.go, status/metrics.go; core and aws: pkg/controllers/controllers.go)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from tests import builders
from tests.runtime import exporting

from karpy import clock, rejections
from karpy.api import decoding
from karpy.kube import client, resources
from karpy.runtime import metrics
from karpy.runtime.metrics import naming, operatorpkg
from karpy.state import cluster

START = 1_700_000_000.0
EXPONENTIAL = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0]
"""core's buckets for the NodeClaim, NodePool, Node and CapacityBuffer families, as upstream spells them out."""


def at(seconds: float) -> str:
    """The RFC 3339 time `seconds` after START."""
    return decoding.format_timestamp(START + seconds)


def cond(type_: str, status: str, *, since: float = 0.0, reason: str = "") -> dict[str, str]:
    return builders.condition(type_, status, reason=reason, message="", lastTransitionTime=at(since))


def with_conditions(obj: dict[str, Any], *conditions: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.setdefault("status", {})["conditions"] = list(conditions)
    return out


class World:
    """A state cache on a manual clock with the controller's operatorpkg series watching it."""

    def __init__(self, *, leading: bool = True, rejections: rejections.MemorySink | None = None) -> None:
        self.clock = clock.ManualClock(START)
        self.leading = leading
        self.sink = rejections
        self.state = cluster.Cluster(clock=self.clock, rejections=rejections)
        self.metrics = metrics.Metrics()
        self.metrics.watch_cluster_series(self.state, now=self.clock.now)
        self.state.add_listener(self.metrics.object_listener(now=self.clock.now, leading=lambda: self.leading))

    def apply(self, res: resources.Resource, kind: str, obj: dict[str, Any]) -> None:
        self.state.apply(res, client.WatchEvent(kind, obj))

    def value(self, series: str, /, **label_values: str) -> float | None:
        return exporting.samples(self.metrics, series).get(tuple(sorted(label_values.items())))


CLAIM_LABELS = {"karpenter_k8s_aws_ec2nodeclass": "default", "karpenter_sh_nodepool": "web"}
NODECLAIM = {"group": "karpenter.sh", "kind": "NodeClaim"}


claim = functools.partial(builders.nodeclaim, "web-a", pool="web", labels={"karpenter.k8s.aws/ec2nodeclass": "default"})


def test_a_condition_turning_counts_a_transition_and_how_long_its_status_held() -> None:
    w = World()
    w.apply(resources.NODECLAIMS, client.ADDED, with_conditions(claim(), cond("Launched", "Unknown")))
    w.clock.advance(90)
    launched = with_conditions(claim(), cond("Launched", "True", since=90, reason="Launched"))
    w.apply(resources.NODECLAIMS, client.MODIFIED, launched)
    w.apply(resources.NODECLAIMS, client.MODIFIED, launched)  # a resync: nothing turned

    turned = {"type": "Launched", "status": "True", "reason": "Launched"}
    assert w.value("operator_nodeclaim_status_condition_transitions_total", **turned, **CLAIM_LABELS) == 1
    assert w.value("operator_status_condition_transitions_total", **turned, **NODECLAIM) == 1
    left = {"type": "Launched", "status": "Unknown"}  # the status it left, held 90 s
    held = "operator_nodeclaim_status_condition_transition_seconds"
    assert w.value(f"{held}_count", **left, **CLAIM_LABELS) == 1
    assert w.value(f"{held}_sum", **left, **CLAIM_LABELS) == 90
    assert w.value(f"{held}_bucket", **left, **CLAIM_LABELS, le="64.0") == 0
    assert w.value(f"{held}_bucket", **left, **CLAIM_LABELS, le="128.0") == 1
    assert w.value("operator_status_condition_transition_seconds_sum", **left, **NODECLAIM) == 90
    # appearing Unknown is no transition (a missing condition counts as Unknown)
    unknown = {"type": "Launched", "status": "Unknown", "reason": ""}
    assert w.value("operator_nodeclaim_status_condition_transitions_total", **unknown, **CLAIM_LABELS) is None


NO_TIME = {"type": "Ready", "status": "True"}
TRANSITIONS = {
    "appears-true": ([], [cond("Ready", "True")], [("Ready", "True", None)]),
    "appears-false": ([], [cond("Ready", "False")], [("Ready", "False", None)]),
    "appears-unknown": ([], [cond("Ready", "Unknown")], []),
    "turns": ([cond("Ready", "Unknown")], [cond("Ready", "True", since=30)], [("Ready", "True", 30.0)]),
    "reason-only": ([cond("Ready", "True", reason="A")], [cond("Ready", "True", reason="B")], []),
    "goes-away": ([cond("Ready", "True")], [], []),
    "time-moved-back": (
        [cond("Ready", "True", since=60)],
        [cond("Ready", "False", since=10)],
        [("Ready", "False", 0.0)],
    ),
    "no-time": ([cond("Ready", "False")], [NO_TIME], [("Ready", "True", None)]),
    "first-of-a-type-wins": ([], [cond("Ready", "Unknown"), cond("Ready", "True")], []),
}
"""(conditions before, conditions after, (type, status, seconds the left status held) of each transition)."""


@pytest.mark.parametrize(("before", "after", "expected"), TRANSITIONS.values(), ids=TRANSITIONS.keys())
def test_transitions_between_two_versions(
    before: list[dict[str, str]], after: list[dict[str, str]], expected: list[tuple[str, str, float | None]]
) -> None:
    old = with_conditions(claim(), *before)
    new = with_conditions(claim(), *after)
    got = [(t.condition.type, t.condition.status, t.held_seconds) for t in operatorpkg.transitions(old, new)]
    assert got == expected


def test_an_object_deleted_is_timed_from_its_deletion_once() -> None:
    w = World()
    w.apply(resources.NODECLAIMS, client.ADDED, claim())
    w.clock.advance(10)
    deleting = builders.deleting(claim(), at=at(10))
    w.apply(resources.NODECLAIMS, client.MODIFIED, deleting)
    w.clock.advance(25)
    gauge = "operator_nodeclaim_termination_current_time_seconds"
    assert w.value(gauge, namespace="", name="web-a", **CLAIM_LABELS) == 25
    assert w.value("operator_termination_current_time_seconds", namespace="", name="web-a", **NODECLAIM) == 25

    w.clock.advance(15)
    w.apply(resources.NODECLAIMS, client.DELETED, deleting)
    w.apply(resources.NODECLAIMS, client.DELETED, deleting)  # a re-list's DELETED for what is gone already
    took = "operator_nodeclaim_termination_duration_seconds"
    assert w.value(f"{took}_count", **CLAIM_LABELS) == 1
    assert w.value(f"{took}_sum", **CLAIM_LABELS) == 40
    assert w.value(f"{took}_bucket", **CLAIM_LABELS, le="32.0") == 0
    assert w.value(f"{took}_bucket", **CLAIM_LABELS, le="64.0") == 1
    assert w.value("operator_termination_duration_seconds_sum", **NODECLAIM) == 40
    assert w.value(gauge, namespace="", name="web-a", **CLAIM_LABELS) is None  # gone with the object


def test_an_object_never_seen_being_deleted_is_not_timed() -> None:
    w = World()
    w.apply(resources.NODEPOOLS, client.ADDED, builders.nodepool("web"))
    w.apply(resources.NODEPOOLS, client.DELETED, builders.nodepool("web"))
    assert w.value("operator_nodepool_termination_duration_seconds_count") == 0


def test_after_a_restart_an_object_mid_deletion_is_timed_once_from_its_deletion() -> None:
    """What upstream does too: a new process sees the object being deleted on its first LIST, and observes the whole
    deletion when it is gone."""
    w = World()
    w.clock.advance(100)
    w.apply(resources.NODEPOOLS, client.ADDED, builders.deleting(builders.nodepool("web"), at=at(0)))
    w.apply(resources.NODEPOOLS, client.DELETED, builders.deleting(builders.nodepool("web"), at=at(0)))
    assert w.value("operator_nodepool_termination_duration_seconds_count") == 1
    assert w.value("operator_nodepool_termination_duration_seconds_sum") == 100
    deprecated = {"group": "karpenter.sh", "kind": "NodePool"}
    assert w.value("operator_termination_duration_seconds_sum", **deprecated) == 100


def test_a_follower_counts_nothing() -> None:
    w = World(leading=False)
    w.apply(resources.NODEPOOLS, client.ADDED, with_conditions(builders.nodepool("web"), cond("Ready", "True")))
    w.apply(resources.NODEPOOLS, client.DELETED, builders.deleting(builders.nodepool("web")))
    assert (
        w.value("operator_nodepool_status_condition_transitions_total", type="Ready", status="True", reason="") is None
    )
    assert w.value("operator_nodepool_termination_duration_seconds_count") == 0


def test_nodes_carry_their_pool_class_and_initialization_and_feed_no_deprecated_family() -> None:
    w = World()
    node_labels = {"karpenter.sh/nodepool": "web", "karpenter.sh/initialized": "true"}
    node = builders.node("n1", labels=node_labels, conditions=[cond("Ready", "False", reason="KubeletNotReady")])
    w.apply(resources.NODES, client.ADDED, node)
    w.clock.advance(5)
    extra = {"karpenter_k8s_aws_ec2nodeclass": "", "karpenter_sh_nodepool": "web", "karpenter_sh_initialized": "true"}
    transition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
    assert w.value("operator_node_status_condition_transitions_total", **transition, **extra) == 1
    current = {"namespace": "", "name": "n1", **transition, **extra}
    assert w.value("operator_node_status_condition_count", **current) == 1
    assert w.value("operator_node_status_condition_current_status_seconds", **current) == 5
    deprecated = exporting.samples(w.metrics, "operator_status_condition_transitions_total")
    assert not [labels for labels in deprecated if ("kind", "Node") in labels]


def test_condition_gauges_per_object_in_upstreams_labels_and_the_deprecated_ones_with_group_and_kind() -> None:
    w = World()
    pool = with_conditions(builders.nodepool("web"), cond("Ready", "False", reason="NodeClassNotReady"))
    w.apply(resources.NODEPOOLS, client.ADDED, pool)
    nodeclass = with_conditions(builders.ec2nodeclass("default"), cond("Ready", "True", reason="Ready"))
    w.apply(resources.EC2NODECLASSES, client.ADDED, nodeclass)
    w.clock.advance(600)
    labels = {"namespace": "", "name": "web", "type": "Ready", "status": "False", "reason": "NodeClassNotReady"}
    assert w.value("operator_nodepool_status_condition_count", **labels) == 1
    assert w.value("operator_nodepool_status_condition_current_status_seconds", **labels) == 600
    deprecated = {**labels, "group": "karpenter.sh", "kind": "NodePool"}
    assert w.value("operator_status_condition_count", **deprecated) == 1
    assert w.value("operator_status_condition_current_status_seconds", **deprecated) == 600
    ready = {"namespace": "", "name": "default", "type": "Ready", "status": "True", "reason": "Ready"}
    assert w.value("operator_ec2nodeclass_status_condition_count", **ready) == 1
    assert w.value("operator_status_condition_count", **ready, group="karpenter.k8s.aws", kind="EC2NodeClass") == 1

    # a NodePool being deleted still shows its conditions, as upstream's status controller reads it until it is gone
    w.apply(resources.NODEPOOLS, client.MODIFIED, builders.deleting(pool, at=at(600)))
    w.clock.advance(30)
    assert w.value("operator_nodepool_status_condition_count", **labels) == 1
    assert w.value("operator_nodepool_termination_current_time_seconds", namespace="", name="web") == 30


def test_a_status_no_parser_accepts_is_read_without_failing_the_cache() -> None:
    """The listener runs on every update of the cache, which keeps objects that do not parse: it must not raise (the
    cache would report the object as one it failed to handle), and the gauges show what can be read of them."""
    w = World(rejections=rejections.MemorySink())
    broken = claim()
    broken["status"] = {"conditions": ["Ready", {"type": "Ready", "status": "True", "lastTransitionTime": "soon"}]}
    w.apply(resources.NODECLAIMS, client.ADDED, broken)
    w.apply(resources.NODECLAIMS, client.MODIFIED, {**broken, "status": "none"})
    w.apply(resources.NODECLAIMS, client.DELETED, builders.deleting({**broken, "metadata": {"name": "web-a"}}))
    assert w.sink is not None
    assert [r.reason for r in w.sink.reports if r.reason != rejections.Reason.INVALID] == []
    w.apply(resources.NODECLAIMS, client.ADDED, broken)
    current = {"namespace": "", "name": "web-a", "type": "Ready", "status": "True", "reason": "", **CLAIM_LABELS}
    assert w.value("operator_nodeclaim_status_condition_count", **current) == 1
    assert w.value("operator_nodeclaim_status_condition_current_status_seconds", **current) is None  # no time


_CURRENT = {"namespace", "name", "type", "status", "reason"}
_EXTRA = {
    "operator_nodeclaim": {"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
    "operator_nodepool": set(),
    "operator_node": {"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
    "operator_ec2nodeclass": set(),
    "operator_capacitybuffer": set(),
    "operator": {"group", "kind"},  # the deprecated kind-less families
}
"""The labels each kind's status controller adds (core and aws: pkg/controllers/controllers.go `WithLabels`)."""
LABELS = {
    f"{prefix}_{family}": labels | extra
    for prefix, extra in _EXTRA.items()
    for family, labels in {
        "status_condition_count": _CURRENT,
        "status_condition_current_status_seconds": _CURRENT,
        "status_condition_transitions_total": {"type", "status", "reason"},
        "status_condition_transition_seconds": {"type", "status"},
        "termination_current_time_seconds": {"namespace", "name"},
        "termination_duration_seconds": set(),
    }.items()
}
"""operatorpkg's label names of every family (status/metrics.go), the kind's added to each."""


def test_every_family_has_operatorpkgs_labels() -> None:
    exported = exporting.exported(exporting.driven())
    assert len(LABELS) == 36
    assert {name: exported[name]["labels"] for name in LABELS} == LABELS


def test_buckets_are_upstreams_per_kind() -> None:
    exported = exporting.exported(exporting.driven())
    for kind in ("nodeclaim", "nodepool", "node", "capacitybuffer"):
        for family in ("status_condition_transition_seconds", "termination_duration_seconds"):
            assert exported[f"operator_{kind}_{family}"]["buckets"] == EXPONENTIAL
    go_default = list(naming.GO_DEFAULT_BUCKETS)
    assert exported["operator_ec2nodeclass_status_condition_transition_seconds"]["buckets"] == go_default
    assert exported["operator_ec2nodeclass_termination_duration_seconds"]["buckets"] == go_default
    assert exported["operator_status_condition_transition_seconds"]["buckets"] == go_default
    assert exported["operator_termination_duration_seconds"]["buckets"] == go_default
