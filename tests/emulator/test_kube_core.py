"""FakeKubeAPI through the official client: core objects, selectors, patches, replace, binding, conflicts."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import kubernetes
import pytest
from tests import builders

from karpy_emulator.apiserver import objects, runner, server, writes

NS = "default"


def _refusal(error: pytest.ExceptionInfo[kubernetes.client.ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.value.body)
    assert body["kind"] == "Status"
    assert body["code"] == error.value.status
    return body


def test_create_stamps_metadata_and_answers_201(core: kubernetes.client.CoreV1Api) -> None:
    # the bodies name no namespace: the server stamps the one of the request path
    _, code, _ = core.create_namespaced_pod_with_http_info(NS, builders.pod("p1", namespace=None))
    assert code == 201
    first = core.read_namespaced_pod("p1", NS)
    assert first.metadata.uid
    assert first.metadata.namespace == NS
    assert first.metadata.creation_timestamp.timestamp() == 1_700_000_000.0  # the injected clock
    assert first.status.phase == "Pending"  # the API server resets a new pod's status
    second = core.create_namespaced_pod(NS, builders.pod("p2", namespace=None))
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert second.metadata.uid != first.metadata.uid


def test_generate_name_makes_a_unique_name(core: kubernetes.client.CoreV1Api) -> None:
    body = builders.pod("")
    body["metadata"] = {"generateName": "worker-"}
    names = {core.create_namespaced_pod(NS, body).metadata.name for _ in range(3)}
    assert len(names) == 3
    assert all(name.startswith("worker-") and len(name) == len("worker-") + 5 for name in names)


def test_a_generated_name_already_taken_is_drawn_again(
    core: kubernetes.client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffixes = iter(["aaaaa", "aaaaa", "aaaaa", "bbbbb", *["aaaaa"] * writes.GENERATE_NAME_ATTEMPTS])
    monkeypatch.setattr(objects, "generate_name", lambda prefix, _rng: prefix + next(suffixes))
    body = builders.pod("")
    body["metadata"] = {"generateName": "worker-"}
    assert core.create_namespaced_pod(NS, body).metadata.name == "worker-aaaaa"
    assert core.create_namespaced_pod(NS, body).metadata.name == "worker-bbbbb"  # after two taken draws
    with pytest.raises(kubernetes.client.ApiException) as error:  # every draw taken: the API server gives up
        core.create_namespaced_pod(NS, body)
    assert _refusal(error)["reason"] == "AlreadyExists"


def test_duplicate_create_is_409_already_exists(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("p1"))
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod(NS, builders.pod("p1"))
    assert error.value.status == 409
    assert _refusal(error)["reason"] == "AlreadyExists"


def test_missing_object_is_404_not_found(core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.read_namespaced_pod("ghost", NS)
    assert error.value.status == 404
    assert _refusal(error)["message"] == 'pods "ghost" not found'


def test_list_filters_by_label_and_field_selectors(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("a1", labels={"app": "a", "tier": "web"}))
    core.create_namespaced_pod(NS, builders.pod("a2", labels={"app": "a"}, node="n1"))
    core.create_namespaced_pod(NS, builders.pod("b1", labels={"app": "b"}, node="n1"))
    core.create_namespaced_pod("other", builders.pod("c1", labels={"app": "a"}, namespace=None))

    def names(**selectors: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(NS, **selectors).items]

    assert names(label_selector="app=a") == ["a1", "a2"]
    assert names(label_selector="app==a,tier") == ["a1"]
    assert names(label_selector="app!=a") == ["b1"]
    assert names(label_selector="app in (a,b),!tier") == ["a2", "b1"]
    assert names(label_selector="app notin (a)") == ["b1"]
    assert names(field_selector="spec.nodeName=n1") == ["a2", "b1"]
    assert names(field_selector="spec.nodeName!=n1,metadata.name!=a2") == ["a1"]
    assert names(field_selector="spec.nodeName=") == ["a1"]
    everywhere = core.list_pod_for_all_namespaces(label_selector="app=a").items
    assert sorted(p.metadata.name for p in everywhere) == ["a1", "a2", "c1"]


def test_list_response_carries_kind_api_version_and_resource_version(api_client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api_client)
    created = core.create_namespaced_pod(NS, builders.pod("p1"))
    body = json.loads(core.list_namespaced_pod(NS, _preload_content=False).data)
    assert (body["apiVersion"], body["kind"]) == ("v1", "PodList")
    assert int(body["metadata"]["resourceVersion"]) >= int(created.metadata.resource_version)


def test_bad_selector_is_400(core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.list_namespaced_pod(NS, label_selector="app in a")
    assert error.value.status == 400


def test_strategic_merge_patch_merges_lists_by_key(core: kubernetes.client.CoreV1Api) -> None:
    body = builders.pod("p1")
    body["metadata"]["finalizers"] = ["a/one"]
    core.create_namespaced_pod(NS, body)
    patch = {
        "metadata": {"finalizers": ["b/two"], "labels": {"x": "y"}},
        "spec": {"containers": [{"name": "app", "image": "new"}, {"name": "sidecar", "image": "s"}]},
    }
    patched = core.patch_namespaced_pod("p1", NS, patch)
    assert patched.metadata.finalizers == ["a/one", "b/two"]
    assert [(c.name, c.image) for c in patched.spec.containers] == [("app", "new"), ("sidecar", "s")]
    assert patched.metadata.labels == {"x": "y"}


def test_json_patch_and_merge_patch(
    core: kubernetes.client.CoreV1Api, custom: kubernetes.client.CustomObjectsApi
) -> None:
    core.create_namespaced_pod(NS, builders.pod("p1", labels={"keep": "1", "drop": "1"}))
    patched = core.patch_namespaced_pod("p1", NS, [{"op": "remove", "path": "/metadata/labels/drop"}])
    assert patched.metadata.labels == {"keep": "1"}
    created = custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", builders.nodepool("np"))
    assert created is not None  # 201: the client maps only 201 for custom object creation
    merged = custom.patch_cluster_custom_object(
        "karpenter.sh", "v1", "nodepools", "np", {"metadata": {"labels": {"a": "b"}}, "spec": {"weight": 10}}
    )
    assert merged["metadata"]["labels"] == {"a": "b"}
    assert merged["spec"]["weight"] == 10
    assert merged["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"  # merged, not replaced
    removed = custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "np", {"spec": {"weight": None}})
    assert "weight" not in removed["spec"]


def test_status_patch_changes_only_status_and_main_patch_never_status(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("p1"))
    patched = core.patch_namespaced_pod_status(
        "p1", NS, {"status": {"phase": "Running"}, "metadata": {"labels": {"sneaky": "yes"}}}
    )
    assert patched.status.phase == "Running"
    assert not patched.metadata.labels
    main = core.patch_namespaced_pod("p1", NS, {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}})
    assert main.status.phase == "Running"
    assert main.metadata.labels == {"a": "b"}


def test_generation_tracks_spec_changes_only(custom: kubernetes.client.CustomObjectsApi) -> None:
    group, version, plural = "karpenter.sh", "v1", "nodepools"
    created = custom.create_cluster_custom_object(group, version, plural, builders.nodepool("np"))
    assert created["metadata"]["generation"] == 1
    labelled = custom.patch_cluster_custom_object(group, version, plural, "np", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    status = custom.patch_cluster_custom_object_status(group, version, plural, "np", {"status": {"nodes": 1}})
    assert status["metadata"]["generation"] == 1
    weighted = custom.patch_cluster_custom_object(group, version, plural, "np", {"spec": {"weight": 5}})
    assert weighted["metadata"]["generation"] == 2


def test_no_op_patch_keeps_the_resource_version(core: kubernetes.client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, builders.pod("p1", labels={"a": "b"}))
    same = core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"a": "b"}}})
    assert same.metadata.resource_version == created.metadata.resource_version


def test_replace_and_409_on_a_stale_resource_version(core: kubernetes.client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, builders.pod("p1"))
    body = core.api_client.sanitize_for_serialization(created)
    body["metadata"]["labels"] = {"replaced": "yes"}
    replaced = core.replace_namespaced_pod("p1", NS, body)
    assert replaced.metadata.labels == {"replaced": "yes"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.replace_namespaced_pod("p1", NS, body)  # still carries the old resourceVersion
    assert error.value.status == 409
    assert "the object has been modified" in _refusal(error)["message"]
    stale = {"metadata": {"resourceVersion": created.metadata.resource_version, "labels": {"x": "y"}}}
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.patch_namespaced_pod("p1", NS, stale)
    assert error.value.status == 409


def test_json_patch_test_op_on_a_stale_resource_version_is_422(core: kubernetes.client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, builders.pod("p1"))
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"bump": "1"}}})
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": created.metadata.resource_version},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]},
    ]
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.patch_namespaced_pod("p1", NS, ops)
    assert error.value.status == 422  # what Kopf expects to retry its finalizer patch
    assert not core.read_namespaced_pod("p1", NS).metadata.finalizers


def test_binding_sets_node_name_and_scheduled_condition(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("p1"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1"},
        "target": {"kind": "Node", "name": "n1"},
    }
    # Like the real API server, the answer is a Status, which the client cannot read as a V1Binding (a known
    # client issue): read it raw.
    answer = core.create_namespaced_pod_binding("p1", NS, binding, _preload_content=False)
    assert answer.status == 201
    assert json.loads(answer.data)["status"] == "Success"
    bound = core.read_namespaced_pod("p1", NS)
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod_binding("p1", NS, binding, _preload_content=False)
    assert error.value.status == 409


def test_delete_with_finalizer_marks_then_releases(core: kubernetes.client.CoreV1Api) -> None:
    body = builders.pod("p1")
    body["metadata"]["finalizers"] = ["x/hold"]
    core.create_namespaced_pod(NS, body)
    core.delete_namespaced_pod("p1", NS)
    deleting = core.read_namespaced_pod("p1", NS)
    assert deleting.metadata.deletion_timestamp is not None
    core.patch_namespaced_pod("p1", NS, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.read_namespaced_pod("p1", NS)
    assert error.value.status == 404


def test_delete_collection_by_selector(core: kubernetes.client.CoreV1Api) -> None:
    for name, app in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        core.create_namespaced_pod(NS, builders.pod(name, labels={"app": app}))
    core.delete_collection_namespaced_pod(NS, label_selector="app=a")
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["b1"]


def test_discovery_names_the_core_group_and_subresource_kinds(api_client: kubernetes.client.ApiClient) -> None:
    core_resources = kubernetes.client.CoreV1Api(api_client).get_api_resources()
    assert core_resources.group_version == "v1"
    by_name = {r.name: r for r in core_resources.resources}
    assert (by_name["pods/eviction"].kind, by_name["pods/eviction"].group) == ("Eviction", "policy")
    assert by_name["pods/binding"].kind == "Binding"
    assert by_name["pods/status"].kind == "Pod"
    karpenter = kubernetes.client.CustomObjectsApi(api_client).get_api_resources("karpenter.sh", "v1")
    assert {(r.name, r.kind) for r in karpenter.resources} >= {("nodeclaims", "NodeClaim"), ("nodepools", "NodePool")}


def test_runner_serves_on_loopback_and_stops(kube: runner.KubeAPIRunner) -> None:
    assert kube.url.startswith("http://127.0.0.1:")
    assert kube.port > 0


def test_history_bounds_keep_long_runs_small(tmp_path: pathlib.Path) -> None:
    api = server.FakeKubeAPI(object_history=2, request_history=5)
    with (
        runner.KubeAPIRunner(api) as kube,
        kubernetes.config.new_client_from_config(str(kube.write_kubeconfig(tmp_path / "kubeconfig"))) as client,
    ):
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespaced_pod(NS, builders.pod("p1"))
        for i in range(20):
            core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"i": str(i)}}})
        history = api.objects["v1/pods", NS, "p1"].history
        assert len(history) == 2
        assert history[-1]["metadata"]["labels"] == {"i": "19"}
        assert 5 <= len(list(api)) <= 10  # 22 requests were made; the spy keeps at most twice the bound


def test_a_reaction_declared_by_a_test_intercepts_without_storing(
    kube: runner.KubeAPIRunner, custom: kubernetes.client.CustomObjectsApi
) -> None:
    """Fault injection through kmock's DSL still works: the intercepted create answers 503 and stores nothing."""
    api = kube.api
    nodeclaims = api.resource("karpenter.sh/v1/nodeclaims")

    async def inject() -> None:
        api["post", nodeclaims][:1] << 503

    kube.call(inject)
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.create_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", builders.nodeclaim("nc-1"))
    assert error.value.status == 503
    assert custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"] == []
    created = custom.create_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", builders.nodeclaim("nc-1"))
    assert created["metadata"]["name"] == "nc-1"  # the reaction was for one request only


def test_reads_follow_every_new_version_even_one_a_test_stores_through_kmock(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api
) -> None:
    """Each stored version is encoded once and reused: a later version, however it was stored, is what reads see."""
    core.create_namespaced_pod(NS, builders.pod("p1"))
    assert not core.list_namespaced_pod(NS).items[0].metadata.labels  # encoded and cached
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"step": "patched"}}})
    assert core.read_namespaced_pod("p1", NS).metadata.labels == {"step": "patched"}
    assert core.list_namespaced_pod(NS).items[0].metadata.labels == {"step": "patched"}
    stored = kube.api.live("v1/pods", NS, "p1")
    assert stored is not None
    stored["metadata"]["labels"] = {"step": "stored by kmock"}

    async def store_directly() -> None:
        kube.api.objects["v1/pods", NS, "p1"] = stored

    kube.call(store_directly)
    assert core.read_namespaced_pod("p1", NS).metadata.labels == {"step": "stored by kmock"}
    assert core.list_namespaced_pod(NS).items[0].metadata.labels == {"step": "stored by kmock"}


def test_discovery_serves_capacity_buffers_namespaced(api_client: kubernetes.client.ApiClient) -> None:
    # as core's CRD declares them (pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    listed = custom.get_api_resources("autoscaling.x-k8s.io", "v1beta1")
    by_name = {r.name: r for r in listed.resources}
    buffers = by_name["capacitybuffers"]
    assert (buffers.kind, buffers.namespaced, buffers.short_names, buffers.categories) == (
        "CapacityBuffer",
        True,
        ["cb"],
        ["autoscaling"],
    )
    assert by_name["capacitybuffers/status"].kind == "CapacityBuffer"
    body = {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "headroom"},
        "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 2},
    }
    stored = custom.create_namespaced_custom_object("autoscaling.x-k8s.io", "v1beta1", NS, "capacitybuffers", body)
    assert stored["spec"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    listed_buffers = custom.list_namespaced_custom_object("autoscaling.x-k8s.io", "v1beta1", NS, "capacitybuffers")
    assert [b["metadata"]["name"] for b in listed_buffers["items"]] == ["headroom"]
