"""Upstream's labels on the per-node and per-pod gauges, read back from scrapes of a state cache (core:
pkg/controllers/metrics/node/controller.go `getNodeLabels`, pkg/controllers/metrics/pod/controller.go `makeLabels`)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tests import builders
from tests.runtime import exporting

from karpy import clock
from karpy.api import labels
from karpy.kube import client, resources
from karpy.runtime import metrics
from karpy.runtime.metrics import nodelabels
from karpy.state import cluster

ALLOCATABLE = "karpenter_nodes_allocatable"
POD_STATE = "karpenter_pods_state"


def _by_labels(m: metrics.Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return exporting.samples(m, name)


def _only(m: metrics.Metrics, series: str, /, **match: str) -> dict[str, str]:
    """The labels of the one sample of `series` whose labels include `match`."""
    found = [dict(k) for k in _by_labels(m, series) if match.items() <= dict(k).items()]
    assert len(found) == 1, f"{len(found)} samples of {series} match {match}"
    return found[0]


def test_a_node_gauge_carries_every_well_known_label_under_upstreams_name() -> None:
    got = _only(exporting.driven(), ALLOCATABLE, node_name="n1", resource_type="cpu")
    assert got == {
        **{name: "v" for _, name in nodelabels.WELL_KNOWN_NAMES},
        "arch": "amd64", "os": "linux", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "m5.large",
        "capacity_type": "on-demand", "nodepool": "web",
        "node_name": "n1", "phase": "Running", "managed": "true", "resource_type": "cpu",
    }  # fmt: skip
    assert "instance_cpu_sustained_clock_speed_mhz" in got  # karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz
    assert "ec2nodeclass" not in got  # not among upstream's well-known labels


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("topology.kubernetes.io/zone", "zone"),
        ("topology.k8s.aws/zone-id", "zone_id"),
        ("node.kubernetes.io/instance-type", "instance_type"),
        ("karpenter.sh/capacity-type", "capacity_type"),
        ("karpenter.k8s.aws/instance-encryption-in-transit-supported", "instance_encryption_in_transit_supported"),
        ("node.kubernetes.io/windows-build", "windows_build"),
    ],
)
def test_a_label_key_becomes_its_last_segment_in_snake_case(key: str, name: str) -> None:
    assert nodelabels.metric_label_name(key) == name
    assert (key, name) in nodelabels.WELL_KNOWN_NAMES


def _node_labels(pool: str = "", zone: str = "us-east-1a") -> dict[str, str]:
    return {labels.LABEL_ZONE: zone, labels.LABEL_ARCH: "arm64", **({labels.LABEL_NODEPOOL: pool} if pool else {})}


def _scraped(*objects: tuple[resources.Resource, dict[str, Any]]) -> tuple[metrics.Metrics, cluster.Cluster]:
    state = cluster.Cluster(clock=clock.ManualClock(exporting.START))
    for res, obj in objects:
        state.apply(res, client.WatchEvent(client.ADDED, obj))
    m = metrics.Metrics()
    m.watch_cluster_series(state, now=lambda: exporting.START + 60)
    return m, state


def test_node_resources_are_reported_as_upstream_does_zeros_and_pods_included() -> None:
    node = builders.node(
        "u1",
        labels=_node_labels(),
        capacity={"cpu": "2", "memory": "8Gi", "pods": "29", "ephemeral-storage": "20Gi"},
        allocatable={"cpu": "1930m", "memory": "7Gi", "pods": "29", "ephemeral-storage": "18Gi"},
    )
    m, _ = _scraped((resources.NODES, node))
    overhead = {dict(k)["resource_type"]: v for k, v in _by_labels(m, "karpenter_nodes_system_overhead").items()}
    assert overhead == pytest.approx({"cpu": 0.07, "memory": 2.0**30, "pods": 0.0, "ephemeral_storage": 2 * 2.0**30})
    allocatable = {dict(k)["resource_type"]: v for k, v in _by_labels(m, ALLOCATABLE).items()}
    assert allocatable == pytest.approx(
        {"cpu": 1.93, "memory": 7 * 2.0**30, "pods": 29, "ephemeral_storage": 18 * 2.0**30}
    )
    # a Node without a NodeClaim is not managed; labels it lacks (nodepool, phase, ...) are no labels at all
    assert _only(m, ALLOCATABLE, resource_type="cpu") == {
        "node_name": "u1", "zone": "us-east-1a", "arch": "arm64", "managed": "false", "resource_type": "cpu",
    }  # fmt: skip


def _status(phase: str = "Running", *, ready: bool = False) -> dict[str, Any]:
    return {"phase": phase, "conditions": [builders.condition("Ready", "True" if ready else "False")]}


_pod = functools.partial(builders.pod, namespace="shop")


REPLICA_SET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9", "uid": "rs", "controller": True}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (
            _pod("a", node="n1", status=_status(ready=True), owners=[REPLICA_SET]),
            {"name": "a", "namespace": "shop", "owner": "/apis/apps/v1/namespaces/shop/replicasets/web-7d9",
             "node": "n1", "scheduled": "true", "nodepool": "web", "zone": "us-east-1b", "arch": "arm64",
             "phase": "Running", "ready": "true", "managed": "true"},
        ),
        (  # pending: no node, so none of the node's labels
            _pod("b", status=_status("Pending")),
            {"name": "b", "namespace": "shop", "scheduled": "false", "phase": "Pending", "ready": "false",
             "managed": "false"},
        ),
        (  # terminal pods are reported too, as upstream's pod controller reports every pod
            _pod("c", node="n1", status=_status("Succeeded")),
            {"name": "c", "namespace": "shop", "node": "n1", "scheduled": "true", "nodepool": "web",
             "zone": "us-east-1b", "arch": "arm64", "phase": "Succeeded", "ready": "false", "managed": "true"},
        ),
        (  # bound to a node the cache does not know: the node's labels are empty
            _pod("d", node="gone", status=_status()),
            {"name": "d", "namespace": "shop", "node": "gone", "scheduled": "true", "phase": "Running",
             "ready": "false", "managed": "false"},
        ),
    ],
)  # fmt: skip
def test_pod_state_labels(pod: dict[str, Any], expected: dict[str, str]) -> None:
    node = builders.node("n1", labels=_node_labels("web", "us-east-1b"))
    m, _ = _scraped((resources.NODES, node), (resources.PODS, pod))
    assert _by_labels(m, POD_STATE) == {tuple(sorted(expected.items())): 1.0}


def test_labels_follow_the_objects_from_one_scrape_to_the_next() -> None:
    node = builders.node("n1", labels=_node_labels("web", "us-east-1b"))
    pod = builders.pod("a", namespace="shop")
    m, state = _scraped((resources.NODES, node), (resources.PODS, pod))
    assert _only(m, POD_STATE, name="a")["scheduled"] == "false"
    state.apply(resources.PODS, client.WatchEvent(client.MODIFIED, {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}))
    assert _only(m, POD_STATE, name="a")["zone"] == "us-east-1b"
    relabelled = builders.node("n1", labels=_node_labels("web", "us-east-1c"))
    state.apply(resources.NODES, client.WatchEvent(client.MODIFIED, relabelled))  # the pod itself is unchanged
    assert _only(m, POD_STATE, name="a")["zone"] == "us-east-1c"
    assert _only(m, ALLOCATABLE, node_name="n1", resource_type="cpu")["zone"] == "us-east-1c"
    state.apply(resources.PODS, client.WatchEvent(client.DELETED, pod))
    assert _by_labels(m, POD_STATE) == {}


def test_per_object_results_are_kept_while_the_object_is_and_forgotten_after() -> None:
    built: list[str] = []
    kept: nodelabels.PerObject[str] = nodelabels.PerObject()
    a, b = {"name": "a"}, {"name": "b"}

    def build(obj: dict[str, str]) -> str:
        built.append(obj["name"])
        return obj["name"]

    def scrape(*objects: dict[str, str], depends_on: object = None) -> None:
        for obj in objects:
            kept.get(obj, depends_on, functools.partial(build, obj))
        kept.scraped()

    scrape(a, b)
    scrape(a, b)
    assert built == ["a", "b"]  # the second scrape derived nothing again
    scrape(b)  # a is gone
    scrape(a, b)
    assert built == ["a", "b", "a"]  # a was forgotten, b kept
    scrape(b, depends_on="node changed")
    assert built == ["a", "b", "a", "b"]
