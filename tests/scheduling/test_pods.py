"""Parsing pods in a batch: shared parts must not change what a pod says."""

from __future__ import annotations

from typing import Any

from karpy.scheduling import pods


def _manifest(name: str, value: str, *, cpu: str = "1") -> dict[str, Any]:
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": value}},
    }
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": value}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            "topologySpreadConstraints": [spread],
        },
    }


def test_batch_parse_equals_one_by_one_parse() -> None:
    manifests = [_manifest("a", "x"), _manifest("b", "x"), _manifest("c", "y", cpu="2"), _manifest("d", "x")]
    assert pods.from_manifests(iter(manifests)) == [pods.from_manifest(m) for m in manifests]


def test_pods_from_one_template_share_their_parts_and_different_ones_do_not() -> None:
    first, twin, other = pods.from_manifests([_manifest("a", "x"), _manifest("b", "x"), _manifest("c", "y", cpu="2")])
    assert first.labels is twin.labels
    assert first.requests is twin.requests
    assert first.spread is twin.spread
    assert first.name != twin.name
    assert other.labels == {"app": "y"}
    assert other.requests["cpu"] == 2000
    assert other.spread != first.spread


def test_maps_are_shared_only_in_the_same_order() -> None:
    one = _manifest("a", "x")
    one["metadata"]["labels"] = {"app": "x", "tier": "web"}
    two = _manifest("b", "x")
    two["metadata"]["labels"] = {"tier": "web", "app": "x"}
    a, b = pods.from_manifests([one, two])
    assert a.labels == b.labels
    assert a.labels is not b.labels
    assert list(b.labels) == ["tier", "app"]


def _requests(spec: dict[str, Any]) -> dict[str, int]:
    return dict(pods.from_manifest({"metadata": {"name": "p"}, "spec": spec}).requests)


def test_pod_level_resources_replace_the_containers_sum() -> None:
    # component-helpers PodRequests: pod-level requests (Kubernetes 1.34) stand for cpu, memory and hugepages,
    # limits default them, other resources still come from the containers, overhead is added on top
    containers = [
        {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi", "example.com/dev": "1"}}},
        {"name": "b", "resources": {"requests": {"cpu": "200m"}}},
    ]
    assert _requests({"containers": containers, "resources": {"requests": {"cpu": "3"}}}) == {
        "cpu": 3000,
        "memory": 64 * 2**20 * 1000,
        "example.com/dev": 1000,
        "pods": 1000,
    }
    got = _requests(
        {
            "containers": containers,
            "resources": {"limits": {"cpu": "2", "memory": "1Gi", "example.com/dev": "5"}},
            "overhead": {"cpu": "250m"},
        }
    )
    assert got == {"cpu": 2250, "memory": 2**30 * 1000, "example.com/dev": 1000, "pods": 1000}
