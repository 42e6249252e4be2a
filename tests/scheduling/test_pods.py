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
