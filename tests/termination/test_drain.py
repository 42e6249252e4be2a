"""Table tests of the drain decisions: tiers, skipped pods, do-not-disrupt forms, TGP force thresholds."""

from __future__ import annotations

from typing import Any

import pytest
from tests.nodeclaim import builders as nodeclaim_builders

from karpy.api import labels
from karpy.termination import drain

T0 = nodeclaim_builders.T0
DND = labels.ANNOTATION_DO_NOT_DISRUPT


def _names(pods: tuple[drain.DrainPod, ...]) -> list[str]:
    return [p.name for p in pods]


def test_parse_reads_what_draining_needs() -> None:
    pod = nodeclaim_builders.drain_pod(
        "p",
        owners=[nodeclaim_builders.DAEMONSET_OWNER],
        priorityClassName="system-node-critical",
        terminationGracePeriodSeconds=45,
        deleted=nodeclaim_builders.ts(T0 + 1),
        claims=["data"],
        annotations={DND: "true"},
    )
    assert (pod.daemon, pod.mirror, pod.tier) == (True, False, drain.Tier.CRITICAL_DAEMON)
    assert (pod.grace_seconds, pod.deletion_timestamp, pod.pvc_names, pod.do_not_disrupt) == (
        45,
        T0 + 1,
        ("data",),
        "true",
    )
    assert drain.from_manifest({"metadata": {"name": "bare"}}).grace_seconds == 30


def test_only_the_first_non_empty_tier_is_evicted() -> None:
    pods = [
        nodeclaim_builders.drain_pod(
            "crit-ds", owners=[nodeclaim_builders.DAEMONSET_OWNER], priorityClassName="system-node-critical"
        ),
        nodeclaim_builders.drain_pod("crit", priorityClassName="system-cluster-critical"),
        nodeclaim_builders.drain_pod("ds", owners=[nodeclaim_builders.DAEMONSET_OWNER]),
        nodeclaim_builders.drain_pod("app"),
    ]
    order = []
    while pods:
        step = drain.plan(pods, now=T0, termination_time=None)
        order.append(_names(step.evict))
        pods = [p for p in pods if p.name not in order[-1]]
    assert order == [["app"], ["ds"], ["crit"], ["crit-ds"]]


@pytest.mark.parametrize(
    ("kwargs", "waits", "evicts"),
    [
        ({}, True, True),
        ({"owners": [nodeclaim_builders.MIRROR_OWNER]}, False, False),
        ({"phase": "Succeeded"}, False, False),
        ({"phase": "Failed"}, False, False),
        ({"tolerations": [{"key": labels.TAINT_DISRUPTED_KEY, "operator": "Exists"}]}, False, False),
        ({"tolerations": [{"operator": "Exists"}]}, False, False),  # tolerates everything
        (
            {"tolerations": [{"key": labels.TAINT_DISRUPTED_KEY, "operator": "Exists", "effect": "NoExecute"}]},
            True,
            True,
        ),
        ({"deleted": nodeclaim_builders.ts(T0 - 10)}, True, False),  # terminating: wait for it, no second eviction
        ({"deleted": nodeclaim_builders.ts(T0 - 60)}, True, False),  # a minute exactly: still waited for
        ({"deleted": nodeclaim_builders.ts(T0 - 61)}, False, False),  # stuck terminating: stop waiting
        ({"annotations": {DND: "true"}}, True, False),
        ({"annotations": {DND: "10m"}, "started": nodeclaim_builders.ts(T0 - 599)}, True, False),
        ({"annotations": {DND: "10m"}, "started": nodeclaim_builders.ts(T0 - 600)}, True, True),  # window over
        ({"annotations": {DND: "1h30m"}, "started": nodeclaim_builders.ts(T0 - 3600)}, True, False),
        ({"annotations": {DND: "10m"}, "started": None}, True, False),  # not started: protected, however old
        ({"annotations": {DND: "0s"}, "started": None}, True, True),  # not a positive duration: ignored
        ({"annotations": {DND: "-5m"}, "started": None}, True, True),
        ({"annotations": {DND: "false"}}, True, True),
        ({"annotations": {DND: "soon"}}, True, True),  # not "true" and not a duration: ignored, as upstream
    ],
)
def test_which_pods_hold_the_drain_and_which_are_evicted(kwargs: dict[str, Any], waits: bool, evicts: bool) -> None:
    step = drain.plan([nodeclaim_builders.drain_pod("p", **kwargs)], now=T0, termination_time=None)
    assert (bool(step.waiting), bool(step.evict)) == (waits, evicts)
    assert step.delete == ()  # nothing is ever deleted without a termination grace period
    assert step.drained is not waits


@pytest.mark.parametrize(
    ("grace", "now", "deleted"),
    [
        (30, T0 + 3600 - 30, False),  # exactly at the threshold: not yet ("now > threshold")
        (30, T0 + 3600 - 29, True),
        (600, T0 + 3000, False),
        (600, T0 + 3001, True),
        (7200, T0, True),  # grace longer than the whole TGP: delete at once
    ],
)
def test_force_threshold_is_node_termination_time_minus_pod_grace(grace: int, now: float, deleted: bool) -> None:
    step = drain.plan(
        [nodeclaim_builders.drain_pod("p", terminationGracePeriodSeconds=grace)], now=now, termination_time=T0 + 3600
    )
    assert bool(step.delete) is deleted
    assert bool(step.evict) is not deleted  # forced pods are not evicted as well


def test_force_covers_every_tier_and_do_not_disrupt_but_not_terminating_pods() -> None:
    pods = [
        nodeclaim_builders.drain_pod("app", terminationGracePeriodSeconds=30),
        nodeclaim_builders.drain_pod(
            "crit-ds",
            owners=[nodeclaim_builders.DAEMONSET_OWNER],
            priorityClassName="system-node-critical",
            terminationGracePeriodSeconds=30,
        ),
        nodeclaim_builders.drain_pod("blocker", annotations={DND: "true"}, terminationGracePeriodSeconds=30),
        nodeclaim_builders.drain_pod(
            "leaving", deleted=nodeclaim_builders.ts(T0 + 3580), terminationGracePeriodSeconds=30
        ),
        nodeclaim_builders.drain_pod("slow", terminationGracePeriodSeconds=10),
    ]
    step = drain.plan(pods, now=T0 + 3580, termination_time=T0 + 3600)
    assert _names(step.delete) == ["app", "blocker", "crit-ds"]
    assert _names(step.evict) == ["slow"]  # threshold T0+3590 not passed: it goes through the Eviction API
    assert drain.delete_grace_seconds(T0 + 3600, T0 + 3580) == 20
    assert drain.delete_grace_seconds(T0 + 3600, T0 + 4000) == 0


def test_blocking_attachments() -> None:
    def va(name: str, node: str, pv: str | None) -> dict[str, Any]:
        source: dict[str, Any] = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
        return {"metadata": {"name": name}, "spec": {"nodeName": node, "source": source}}

    attachments = [va("c", "n2", "pv-c"), va("d", "n1", None), va("b", "n1", "pv-b"), va("a", "n1", "pv-a")]
    assert drain.blocking_attachments(attachments, node_name="n1", ignored_volumes=frozenset({"pv-b"})) == ["a"]
    unnamed = {"spec": {"nodeName": "n1", "source": {"persistentVolumeName": "pv-x"}}}
    assert drain.blocking_attachments([unnamed], node_name="n1", ignored_volumes=frozenset()) == [""]


def test_disrupted_patch() -> None:
    node = nodeclaim_builders.node_dict(
        taints=[
            {"key": labels.TAINT_DISRUPTED_KEY, "value": "x", "effect": "NoSchedule"},
            {"key": "k", "effect": "NoExecute"},
        ]
    )
    patch = drain.disrupted_patch(node)
    assert patch == {
        "spec": {
            "taints": [{"key": "k", "effect": "NoExecute"}, {"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}]
        },
        "metadata": {"labels": {labels.LABEL_EXCLUDE_FROM_LB: "karpenter"}, "resourceVersion": "7"},
    }
    done = nodeclaim_builders.node_dict(
        taints=[{"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}],
        labels={labels.LABEL_EXCLUDE_FROM_LB: "karpenter"},
    )
    assert drain.disrupted_patch(done) is None
    tainted_only = nodeclaim_builders.node_dict(taints=[{"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}])
    assert drain.disrupted_patch(tainted_only) == {
        "metadata": {"labels": {labels.LABEL_EXCLUDE_FROM_LB: "karpenter"}, "resourceVersion": "7"}
    }
    labelled_only = nodeclaim_builders.node_dict(taints=[], labels={labels.LABEL_EXCLUDE_FROM_LB: "karpenter"})
    assert drain.disrupted_patch(labelled_only) == {
        "spec": {"taints": [{"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}]},
        "metadata": {"resourceVersion": "7"},
    }


@pytest.mark.parametrize(("failures", "delay"), [(1, 0.1), (2, 0.2), (5, 1.6), (8, 10.0), (30, 10.0)])
def test_backoff(failures: int, delay: float) -> None:
    assert drain.Backoff().delay(failures) == pytest.approx(delay)


def test_a_duration_counts_from_the_pods_start_not_its_creation() -> None:
    """A pod bound long after it was created (it waited for capacity) and not yet started keeps its do-not-disrupt
    duration: upstream reads only status.startTime and fails safe without it."""
    manifest = nodeclaim_builders.pod_dict("late", annotations={DND: "10m"}, started=None)
    manifest["metadata"]["creationTimestamp"] = nodeclaim_builders.ts(T0 - 86400)
    pod = drain.from_manifest(manifest)
    assert pod.started is None
    step = drain.plan([pod], now=T0, termination_time=None)
    assert (_names(step.waiting), step.evict) == (["late"], ())


def test_a_bare_manifest_reads_as_the_api_servers_defaults() -> None:
    assert drain.from_manifest({}) == drain.DrainPod(namespace="", name="")
    sparse = drain.from_manifest({"metadata": {"name": "p"}, "spec": {"terminationGracePeriodSeconds": "45"}})
    assert (sparse.phase, sparse.priority_class, sparse.uid, sparse.grace_seconds) == ("Running", "", "", 30)


def test_owners_are_matched_by_api_version_and_kind() -> None:
    def owned(api_version: str, kind: str) -> drain.DrainPod:
        return drain.from_manifest({"metadata": {"ownerReferences": [{"apiVersion": api_version, "kind": kind}]}})

    assert (owned("apps/v1", "DaemonSet").daemon, owned("v1", "Node").mirror) == (True, True)
    assert not owned("extensions/v1beta1", "DaemonSet").daemon
    assert not owned("apps/v1", "ReplicaSet").daemon
    assert not owned("example.com/v1", "Node").mirror


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": labels.TAINT_DISRUPTED_KEY}, True),  # operator Equal and value "" by default, any effect
        ({"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}, True),
        ({"key": labels.TAINT_DISRUPTED_KEY, "value": "x"}, False),
        ({"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoExecute"}, False),
        ({"key": "example.com/other", "operator": "Exists"}, False),
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
    ],
)
def test_which_tolerations_let_a_pod_stay_on_a_disrupted_node(toleration: dict[str, str], tolerated: bool) -> None:
    assert nodeclaim_builders.drain_pod("p", tolerations=[toleration]).tolerates_disrupted is tolerated


def test_only_persistent_volume_claims_are_volumes_to_wait_for() -> None:
    manifest = nodeclaim_builders.pod_dict("p", claims=["data"])
    manifest["spec"]["volumes"] += [
        {"name": "scratch", "emptyDir": {}},
        {"name": "odd", "persistentVolumeClaim": {"readOnly": True}},
    ]
    assert drain.from_manifest(manifest).pvc_names == ("data",)


@pytest.mark.parametrize("value", [12345, "not-a-time", "", None])
def test_an_unreadable_deletion_timestamp_reads_as_none(value: Any) -> None:
    assert drain.from_manifest({"metadata": {"deletionTimestamp": value}}).deletion_timestamp is None
