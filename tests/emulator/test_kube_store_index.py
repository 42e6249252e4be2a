"""The emulated API server's per-resource index of live objects and its JSON-tree copy: LISTs and a watch's initial
state see exactly the live objects of their own resource, through deletions, re-creations and namespaces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes
import pytest
from tests import builders

from karpy_emulator.apiserver import objects, runner, watching

NS = "default"


def _names(items: list[kubernetes.client.V1Pod]) -> list[str]:
    return [p.metadata.name for p in items]


def test_list_sees_only_the_live_objects_of_its_resource(core: kubernetes.client.CoreV1Api) -> None:
    for name in ("a", "b", "c"):
        core.create_namespaced_pod(NS, builders.pod(name, namespace=None))
    core.create_namespaced_pod("other", builders.pod("z", namespace=None))
    core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    core.delete_namespaced_pod("b", NS)
    assert _names(core.list_namespaced_pod(NS).items) == ["a", "c"]
    assert _names(core.list_pod_for_all_namespaces().items) == ["a", "c", "z"]
    assert [m.metadata.name for m in core.list_namespaced_config_map(NS).items] == ["a"]
    core.create_namespaced_pod(NS, builders.pod("b", namespace=None))  # the same key again, after its deletion
    assert _names(core.list_namespaced_pod(NS).items) == ["a", "b", "c"]
    core.delete_namespaced_config_map("a", NS)
    assert core.list_namespaced_config_map(NS).items == []
    assert _names(core.list_namespaced_pod(NS).items) == ["a", "b", "c"]


def test_a_watch_starts_with_the_live_objects_only(core: kubernetes.client.CoreV1Api) -> None:
    for name in ("a", "b"):
        core.create_namespaced_pod(NS, builders.pod(name, namespace=None))
    core.delete_namespaced_pod("a", NS)
    stream = kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1)
    seen = [(e["type"], e["object"].metadata.name) for e in stream]
    assert seen == [("ADDED", "b")]


def test_an_object_taken_out_of_kmocks_store_is_not_listed(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api
) -> None:
    for name in ("a", "b"):
        core.create_namespaced_pod(NS, builders.pod(name, namespace=None))
    del kube.api.objects["v1/pods", NS, "a"]
    assert _names(core.list_namespaced_pod(NS).items) == ["b"]


def test_clone_copies_a_json_tree_deeply() -> None:
    original = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": [1, 2.5, True, None]}]}, "n": "s"}
    copied = objects.clone(original)
    assert copied == original
    copied["metadata"]["labels"]["a"] = "2"
    copied["spec"]["items"][0]["x"].append(3)
    assert original == {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": [1, 2.5, True, None]}]}, "n": "s"}
    assert copied["spec"]["items"] is not original["spec"]["items"]


def test_clone_deep_copies_what_is_not_json() -> None:
    inner = {"k": [1]}
    original = {"t": (inner,)}
    copied = objects.clone(original)
    assert copied == original
    assert copied["t"][0] is not inner


def test_lists_keep_their_order_through_writes_in_any_order(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api
) -> None:
    """The order is kept on write, not sorted per read: namespaces that prefix one another ("a", "a-b", "ab") stay
    apart, a deleted key leaves its place and a re-created one takes it again."""
    created = [("ab", "m"), ("a", "z"), ("a-b", "c"), ("a", "b"), ("b", "a"), ("ab", "a"), ("a", "m"), ("a-b", "a")]
    for namespace, name in created:
        core.create_namespaced_pod(namespace, builders.pod(name, namespace=None))
    core.delete_namespaced_pod("b", "a")
    core.delete_namespaced_pod("m", "ab")
    core.create_namespaced_pod("a", builders.pod("b", namespace=None))
    listed = [(p.metadata.namespace, p.metadata.name) for p in core.list_pod_for_all_namespaces().items]
    assert listed == sorted(set(created) - {("ab", "m")})
    assert _names(core.list_namespaced_pod("a").items) == ["b", "m", "z"]
    assert _names(core.list_namespaced_pod("a-b").items) == ["a", "c"]
    assert _names(core.list_namespaced_pod("ab").items) == ["a"]
    assert core.list_namespaced_pod("a-").items == []
    for name in ("n3", "n1", "n2"):
        core.create_node({"metadata": {"name": name}})
    assert [n.metadata.name for n in core.list_node().items] == ["n1", "n2", "n3"]


def test_a_namespaced_list_reads_only_its_namespace(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(20):
        core.create_namespaced_pod("busy", builders.pod(f"p{i}", namespace=None, labels={"app": "web"}))
    core.create_namespaced_pod("quiet", builders.pod("only", namespace=None, labels={"app": "web"}))
    matched: list[str] = []
    real = watching.Filter.matches

    def counted(self: watching.Filter, obj: Mapping[str, Any]) -> bool:
        matched.append(obj["metadata"]["name"])
        return real(self, obj)

    monkeypatch.setattr(watching.Filter, "matches", counted)
    assert _names(core.list_namespaced_pod("quiet", label_selector="app=web").items) == ["only"]
    assert matched == ["only"]  # a range of the kept order, not a walk over the 20 pods of "busy"
    assert len(core.list_namespaced_pod("busy").items) == 20
    assert matched == ["only"]  # nothing but the namespace selects: the range is the answer, no object tested
