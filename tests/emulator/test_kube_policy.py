"""FakeKubeAPI through the official client: eviction under PodDisruptionBudgets, custom resources and admission."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes
import pytest
from tests import builders

from karpy_emulator.apiserver import api_status, disruption, runner, server, validation

NS = "default"
KARPENTER = ("karpenter.sh", "v1")


def _eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}


def _ready_pods(
    core: kubernetes.client.CoreV1Api, count: int, labels: dict[str, str], owner: dict[str, Any] | None = None
) -> list[str]:
    names = [f"web-{i}" for i in range(count)]
    for name in names:
        body = builders.pod(name, labels=labels)
        if owner is not None:
            ref = {"apiVersion": "apps/v1", "kind": owner["kind"], "name": owner["metadata"]["name"]}
            body["metadata"]["ownerReferences"] = [{**ref, "uid": owner["metadata"]["uid"], "controller": True}]
        core.create_namespaced_pod(NS, body)
        ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        core.patch_namespaced_pod_status(name, NS, ready)
    return names


def test_eviction_is_refused_with_429_when_the_budget_allows_no_disruption(
    core: kubernetes.client.CoreV1Api, policy: kubernetes.client.PolicyV1Api, kube: runner.KubeAPIRunner
) -> None:
    _ready_pods(core, 3, {"app": "web"})
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("web", {"app": "web"}, minAvailable=2))
    core.create_namespaced_pod_eviction("web-0", NS, _eviction("web-0"))  # 3 healthy, 2 needed: one may go
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod_eviction("web-1", NS, _eviction("web-1"))  # 2 healthy, 2 needed
    assert error.value.status == 429
    body = json.loads(error.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert sorted(p.metadata.name for p in core.list_namespaced_pod(NS).items) == ["web-1", "web-2"]
    assert [(e.name, e.code, e.budgets) for e in kube.api.evictions] == [
        ("web-0", 201, ("web",)),
        ("web-1", 429, ("web",)),
    ]


def test_max_unavailable_counts_the_controllers_desired_replicas(
    api_client: kubernetes.client.ApiClient, policy: kubernetes.client.PolicyV1Api, kube: runner.KubeAPIRunner
) -> None:
    core, apps = kubernetes.client.CoreV1Api(api_client), kubernetes.client.AppsV1Api(api_client)
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    spec = {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    deployment = apps.create_namespaced_deployment(NS, {"metadata": {"name": "web"}, "spec": spec})
    rs_owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deployment.metadata.uid}
    rs_body = {"metadata": {"name": "web-1234", "ownerReferences": [{**rs_owner, "controller": True}]}, "spec": spec}
    replica_set = api_client.sanitize_for_serialization(apps.create_namespaced_replica_set(NS, rs_body))
    _ready_pods(core, 4, {"app": "web"}, owner=replica_set)
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("web", {"app": "web"}, maxUnavailable="50%"))
    for name in ("web-0", "web-1"):
        core.create_namespaced_pod_eviction(name, NS, _eviction(name))
    for name in ("web-2", "web-3"):
        with pytest.raises(kubernetes.client.ApiException) as error:
            core.create_namespaced_pod_eviction(name, NS, _eviction(name))
        assert error.value.status == 429
    # The Deployment wants 4: 50% of 4 is 2 unavailable, so 2 evictions; evicted pods do not shrink the budget.
    allowed = [e.name for e in kube.api.evictions if e.allowed]
    assert allowed == ["web-0", "web-1"]
    assert len(core.list_namespaced_pod(NS).items) == 2


def test_max_unavailable_over_bare_pods_allows_nothing(
    core: kubernetes.client.CoreV1Api, policy: kubernetes.client.PolicyV1Api
) -> None:
    _ready_pods(core, 3, {"app": "web"})
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("web", {"app": "web"}, maxUnavailable=1))
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod_eviction("web-0", NS, _eviction("web-0"))
    assert error.value.status == 429  # upstream finds no controller for the scale and fails safe


def test_pod_in_two_budgets_is_a_500(core: kubernetes.client.CoreV1Api, policy: kubernetes.client.PolicyV1Api) -> None:
    _ready_pods(core, 3, {"app": "web", "tier": "front"})
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("by-app", {"app": "web"}, minAvailable=1))
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("by-tier", {"tier": "front"}, minAvailable=1))
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod_eviction("web-0", NS, _eviction("web-0"))
    assert error.value.status == 500
    assert json.loads(error.value.body)["message"] == disruption.MULTIPLE


def test_eviction_of_a_pod_with_finalizers_marks_it_deleting(core: kubernetes.client.CoreV1Api) -> None:
    body = builders.pod("p1")
    body["metadata"]["finalizers"] = ["x/hold"]
    core.create_namespaced_pod(NS, body)
    core.create_namespaced_pod_eviction("p1", NS, _eviction("p1"))
    assert core.read_namespaced_pod("p1", NS).metadata.deletion_timestamp is not None


def test_pending_and_unselected_pods_ignore_budgets(
    core: kubernetes.client.CoreV1Api, policy: kubernetes.client.PolicyV1Api
) -> None:
    policy.create_namespaced_pod_disruption_budget(NS, builders.pdb("strict", {"app": "web"}, minAvailable=1))
    core.create_namespaced_pod(NS, builders.pod("pending", labels={"app": "web"}))  # Pending: budgets ignored
    core.create_namespaced_pod(NS, builders.pod("other", labels={"app": "db"}))
    _ready_pods(core, 1, {"app": "web"})
    core.create_namespaced_pod_eviction("pending", NS, _eviction("pending"))
    core.create_namespaced_pod_eviction("other", NS, _eviction("other"))
    with pytest.raises(kubernetes.client.ApiException) as error:
        core.create_namespaced_pod_eviction("web-0", NS, _eviction("web-0"))
    assert error.value.status == 429


def test_custom_object_lifecycle_with_finalizer(custom: kubernetes.client.CustomObjectsApi) -> None:
    group, version = KARPENTER
    created = custom.create_cluster_custom_object(
        group, version, "nodeclaims", builders.nodeclaim("nc-1", finalizers=["karpenter.sh/termination"])
    )
    assert created["metadata"]["uid"]
    assert "status" not in created  # a CRD with a status subresource ignores status on create
    fetched = custom.get_cluster_custom_object(group, version, "nodeclaims", "nc-1")
    assert fetched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    listed = custom.list_cluster_custom_object(group, version, "nodeclaims")
    assert listed["kind"] == "NodeClaimList"
    assert [o["metadata"]["name"] for o in listed["items"]] == ["nc-1"]
    status_patch = {"status": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"}}
    patched = custom.patch_cluster_custom_object_status(group, version, "nodeclaims", "nc-1", status_patch)
    assert patched["status"]["providerID"] == "aws:///us-west-2a/i-0123456789abcdef0"
    custom.delete_cluster_custom_object(group, version, "nodeclaims", "nc-1")
    deleting = custom.get_cluster_custom_object(group, version, "nodeclaims", "nc-1")
    assert deleting["metadata"]["deletionTimestamp"]
    custom.patch_cluster_custom_object(group, version, "nodeclaims", "nc-1", {"metadata": {"finalizers": None}})
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.get_cluster_custom_object(group, version, "nodeclaims", "nc-1")
    assert error.value.status == 404


def test_invalid_nodepool_is_refused_with_422_naming_the_field(custom: kubernetes.client.CustomObjectsApi) -> None:
    bad = builders.nodepool("bad")
    bad["spec"]["template"]["spec"]["requirements"] = [{"key": "kubernetes.io/arch", "operator": "Equals"}]
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", bad)
    assert error.value.status == 422
    body = json.loads(error.value.body)
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "NodePool"
    fields = [cause["field"] for cause in body["details"]["causes"]]
    assert "spec.template.spec.requirements[0].operator" in fields
    with pytest.raises(kubernetes.client.ApiException):
        custom.get_cluster_custom_object(*KARPENTER, "nodepools", "bad")  # nothing was stored
    custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("good"))  # others still work


def test_update_making_a_nodepool_invalid_is_refused(custom: kubernetes.client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("np"))
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.patch_cluster_custom_object(*KARPENTER, "nodepools", "np", {"spec": {"weight": 1000}})
    assert error.value.status == 422
    assert [c["field"] for c in json.loads(error.value.body)["details"]["causes"]] == ["spec.weight"]
    assert "weight" not in custom.get_cluster_custom_object(*KARPENTER, "nodepools", "np")["spec"]


def test_nodeclaim_spec_is_immutable(custom: kubernetes.client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(*KARPENTER, "nodeclaims", builders.nodeclaim("nc-1"))
    labelled = custom.patch_cluster_custom_object(
        *KARPENTER, "nodeclaims", "nc-1", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["labels"]["a"] == "b"
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.patch_cluster_custom_object(*KARPENTER, "nodeclaims", "nc-1", {"spec": {"expireAfter": "1h"}})
    assert error.value.status == 422
    causes = json.loads(error.value.body)["details"]["causes"]
    assert {"field": "spec", "message": "spec is immutable", "reason": "FieldValueInvalid"} in causes


def test_injected_validator_decides_admission(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []

    def refuse_odd_weights(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[api_status.Cause]:
        seen.append((obj["metadata"]["name"], old is not None))
        weight = obj.get("spec", {}).get("weight", 0)
        return [api_status.Cause("spec.weight", "must be even")] if weight % 2 else []

    api = server.FakeKubeAPI(validators={validation.NODEPOOLS: refuse_odd_weights})
    with (
        runner.KubeAPIRunner(api) as kube,
        kubernetes.config.new_client_from_config(str(kube.write_kubeconfig(tmp_path / "kubeconfig"))) as client,
    ):
        custom = kubernetes.client.CustomObjectsApi(client)
        custom.create_cluster_custom_object(
            *KARPENTER, "nodepools", {"metadata": {"name": "np"}, "spec": {"weight": 2}}
        )
        with pytest.raises(kubernetes.client.ApiException) as error:
            custom.patch_cluster_custom_object(*KARPENTER, "nodepools", "np", {"spec": {"weight": 3}})
        assert error.value.status == 422
        assert json.loads(error.value.body)["details"]["causes"][0]["field"] == "spec.weight"
        custom.create_cluster_custom_object(*KARPENTER, "nodeclaims", {"metadata": {"name": "free"}, "spec": {}})
    assert seen == [("np", False), ("np", True)]  # nodeclaims have no validator here


def test_crd_defaults_are_stored_like_the_api_server_does(custom: kubernetes.client.CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("np"))
    # Upstream's NodePool CRD defaults: consolidate when empty or underutilized, at once, 10% of nodes at a time.
    assert created["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    fetched = custom.get_cluster_custom_object(*KARPENTER, "nodepools", "np")
    assert fetched["spec"] == created["spec"]
