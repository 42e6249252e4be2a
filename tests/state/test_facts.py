"""Provisionable-pod rules of core: pkg/utils/pod/scheduling.go (`IsProvisionable`), node readings and the DaemonSet
pod, as tables."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy.api import meta
from karpy.scheduling import pods
from karpy.state import facts


def _pending(**changes: Any) -> dict[str, Any]:
    obj = builders.unschedulable(builders.pod("p"))
    for path, value in changes.items():
        section, field = path.split("__")
        obj.setdefault(section, {})[field] = value
    return obj


@pytest.mark.parametrize(
    ("why", "obj", "provisionable"),
    [
        ("unschedulable, unbound", _pending(), True),
        ("already bound", _pending(spec__nodeName="n1"), False),
        ("preempting: nominatedNodeName", _pending(status__nominatedNodeName="n1"), False),
        (
            "DaemonSet-owned",
            _pending(metadata__ownerReferences=[{"kind": "DaemonSet", "name": "ds", "controller": True}]),
            False,
        ),
        (
            "owned by a ReplicaSet",
            _pending(metadata__ownerReferences=[{"kind": "ReplicaSet", "name": "rs", "controller": True}]),
            True,
        ),
        ("mirror pod", _pending(metadata__annotations={facts.MIRROR_ANNOTATION: "x"}), False),
        ("terminal: Failed", _pending(status__phase="Failed"), False),
        ("terminal: Succeeded", _pending(status__phase="Succeeded"), False),
        ("deleting", _pending(metadata__deletionTimestamp="2024-01-01T00:00:00Z"), False),
        ("no PodScheduled condition yet", builders.pod("p"), False),
        (
            "PodScheduled False for another reason",
            _pending(status__conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
            False,
        ),
        (
            "PodScheduled True",
            _pending(status__conditions=[{"type": "PodScheduled", "status": "True"}]),
            False,
        ),
    ],
)
def test_provisionable(why: str, obj: dict[str, Any], provisionable: bool) -> None:
    assert facts.pod_facts(obj).provisionable is provisionable, why


def test_pod_facts_report_binding_termination_and_deletion() -> None:
    obj = builders.pod("p", node="n1")
    obj["status"] = {"phase": "Succeeded"}
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert facts.pod_facts(obj) == facts.PodFacts(node_name="n1", terminal=True, deleting=True, provisionable=False)


def test_keys_are_namespaced_only_for_namespaced_objects() -> None:
    assert facts.key(builders.pod("p", namespace="apps")) == "apps/p"
    assert facts.key(builders.node("n1")) == "n1"


def test_node_readings() -> None:
    node = builders.node("n1", provider_id="aws:///us-west-2a/i-1")
    node["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule", "value": "v"}, {"effect": "NoSchedule"}]
    node["status"]["capacity"] = {"cpu": "4", "memory": "bogus"}
    assert facts.node_provider_id(node) == "aws:///us-west-2a/i-1"
    assert facts.node_taints(node) == (meta.Taint("k", "NoSchedule", "v"),)  # a taint without a key is junk
    assert facts.resource_list(node["status"]["capacity"]) == {"cpu": 4000}
    assert facts.resource_list(node["status"]["allocatable"])["memory"] == 16 * 1024**3 * 1000


def test_daemonset_pod_is_the_template_owned_by_the_daemonset() -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "logs", "namespace": "kube-system", "uid": "u1"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "logs"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
            }
        },
    }
    pod = pods.from_manifest(facts.daemonset_pod(ds))
    assert (pod.namespace, pod.name, pod.is_daemon, dict(pod.labels)) == ("kube-system", "logs", True, {"app": "logs"})
    assert pod.requests["cpu"] == 100


def test_pods_get_their_rfc3339_creation_time_as_epoch_seconds() -> None:
    obj = builders.pod("p")
    obj["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
    assert pods.from_manifest(facts.with_epoch_creation(obj)).creation_timestamp == 1_700_000_000.0
    assert obj["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"  # the input is left alone
    obj["metadata"]["creationTimestamp"] = "yesterday"
    assert facts.with_epoch_creation(obj) is obj
