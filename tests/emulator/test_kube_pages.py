"""Paginated LISTs (`limit` and `continue`) through the official client and the real kubectl's `--chunk-size`."""

from __future__ import annotations

import base64
import json
import pathlib
from typing import Any

import kubernetes
import pytest
from tests import builders
from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator.apiserver import pages, runner, server

NS = "default"


def _names(listed: kubernetes.client.V1PodList) -> list[str]:
    return [pod.metadata.name for pod in listed.items]


def _seed(core: kubernetes.client.CoreV1Api, names: list[str], namespace: str = NS) -> None:
    for name in names:
        core.create_namespaced_pod(namespace, builders.pod(name, namespace=None))


def test_pages_follow_each_other_in_list_order_with_the_first_pages_version(core: kubernetes.client.CoreV1Api) -> None:
    _seed(core, ["e", "b", "d", "a", "c"])
    _seed(core, ["a", "z"], namespace="other")
    seen: list[str] = []
    versions: set[str] = set()
    token = None
    pages_read = 0
    while True:
        page = core.list_namespaced_pod(NS, limit=2, _continue=token)
        pages_read += 1
        seen += _names(page)
        versions.add(page.metadata.resource_version)
        token = page.metadata._continue
        if not token:
            break
    assert seen == ["a", "b", "c", "d", "e"]
    assert pages_read == 3
    assert len(versions) == 1  # every page carries the snapshot's version, as a real server's do
    everywhere = core.list_pod_for_all_namespaces(limit=4)
    assert [(p.metadata.namespace, p.metadata.name) for p in everywhere.items] == [
        (NS, "a"), (NS, "b"), (NS, "c"), (NS, "d"),
    ]  # fmt: skip
    rest = core.list_pod_for_all_namespaces(limit=4, _continue=everywhere.metadata._continue)
    assert [(p.metadata.namespace, p.metadata.name) for p in rest.items] == [(NS, "e"), ("other", "a"), ("other", "z")]
    assert rest.metadata._continue is None


def test_a_page_resumes_after_the_last_key_whatever_changed_before_it(core: kubernetes.client.CoreV1Api) -> None:
    # Resuming by position, the delete of an object already listed would skip one not yet listed.
    _seed(core, ["a", "b", "c", "d"])
    first = core.list_namespaced_pod(NS, limit=2)
    assert _names(first) == ["a", "b"]
    core.delete_namespaced_pod("a", NS)  # behind the cursor
    _seed(core, ["bb"])  # ahead of it
    second = core.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    assert _names(second) == ["bb", "c", "d"]


def test_a_page_resumes_after_its_last_key_when_that_key_was_deleted(core: kubernetes.client.CoreV1Api) -> None:
    _seed(core, ["a", "b", "c", "d"])
    first = core.list_namespaced_pod(NS, limit=2)
    assert _names(first) == ["a", "b"]
    core.delete_namespaced_pod("b", NS)  # the key the token starts after is gone from the store
    second = core.list_namespaced_pod(NS, limit=2, _continue=first.metadata._continue)
    assert _names(second) == ["c", "d"]
    assert second.metadata._continue is None


def _decoded(token: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return document


def test_a_continue_past_the_kept_history_is_410_with_a_token_at_the_latest_version(tmp_path: pathlib.Path) -> None:
    # k8s.io/apiserver/pkg/storage/etcd3/errors.go handleCompactedErrorForPaging: 410 Expired whose ListMeta carries
    # the same start key at resourceVersion -1; that token lists the rest as of now, and its pages carry now's version.
    with (
        runner.KubeAPIRunner(server.FakeKubeAPI(watch_history=3)) as kube,
        kubernetes.config.new_client_from_config(str(kube.write_kubeconfig(tmp_path / "kubeconfig"))) as client,
    ):
        core = kubernetes.client.CoreV1Api(client)
        _seed(core, ["a", "b", "c", "d"])
        first = core.list_namespaced_pod(NS, limit=2)
        assert _names(first) == ["a", "b"]
        _seed(core, ["e", "f", "g", "h"])  # the history keeps 3 changes: those since the first page are not all kept
        with pytest.raises(kubernetes.client.ApiException) as expired:
            core.list_namespaced_pod(NS, limit=2, _continue=first.metadata._continue)
        assert expired.value.status == 410
        status = json.loads(expired.value.body)
        assert status["reason"] == "Expired"
        assert "too old to display a consistent list result" in status["message"]
        fresh = status["metadata"]["continue"]
        assert _decoded(fresh) == {"v": "meta.k8s.io/v1", "rv": -1, "start": "default/b\0"}
        second = core.list_namespaced_pod(NS, limit=2, _continue=fresh)
        assert _names(second) == ["c", "d"]
        now = kube.api.resource_version
        assert second.metadata.resource_version == str(now)
        assert _decoded(second.metadata._continue)["rv"] == now  # the rest is consistent with the second page
        third = core.list_namespaced_pod(NS, limit=2, _continue=second.metadata._continue)
        assert _names(third) == ["e", "f"]
        assert third.metadata.resource_version == str(now)


def test_a_page_with_selectors_counts_only_matching_objects(core: kubernetes.client.CoreV1Api) -> None:
    for index, name in enumerate(["a", "b", "c", "d", "e", "f"]):
        body = builders.pod(name, namespace=None)
        body["metadata"]["labels"] = {"tier": "web" if index % 2 else "db"}
        core.create_namespaced_pod(NS, body)
    first = core.list_namespaced_pod(NS, limit=2, label_selector="tier=web")
    assert _names(first) == ["b", "d"]
    second = core.list_namespaced_pod(NS, limit=2, label_selector="tier=web", _continue=first.metadata._continue)
    assert _names(second) == ["f"]
    assert second.metadata._continue is None


@pytest.mark.parametrize(
    "token",
    [
        "not base64 at all!",
        "e30",
        pages.token(("", "x"), "1")[:-3],
        pages.token(("", "x"), "0"),  # continue.go: ErrInvalidStartRV
        pages.token(("", "x"), "-2"),
    ],
)
def test_a_token_that_is_not_one_is_400(core: kubernetes.client.CoreV1Api, token: str) -> None:
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.list_namespaced_pod(NS, limit=2, _continue=token)
    assert refused.value.status == 400
    body = json.loads(refused.value.body)
    assert body["reason"] == "BadRequest"
    assert "invalid continue token" in body["message"]


def test_the_token_has_upstreams_shape() -> None:
    token = pages.token(("default", "web-1"), "42")
    assert pages.resume(token) == pages.Resume(("default", "web-1"), "42")
    assert pages.resume(pages.token(("", "node-1"), "7")) == pages.Resume(("", "node-1"), "7")
    # k8s.io/apiserver/pkg/storage/continue.go: base64url without padding of the version, rv and start key + NUL
    decoded = json.loads(__import__("base64").urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": 42, "start": "default/web-1\0"}


def test_kubectl_lists_in_chunks(kubectl: emulator_kubectl.Kubectl) -> None:
    manifests = "\n---\n".join(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: web-{index}, namespace: default}}\n"
        "spec: {containers: [{name: app, image: nginx}]}"
        for index in range(7)
    )
    kubectl.run("create", "-f", "-", stdin=manifests)
    chunked = kubectl.run("get", "pods", "--chunk-size=3", "-o", "name")
    assert chunked.out.split() == [f"pod/web-{index}" for index in range(7)]
    table = kubectl.run("get", "pods", "--chunk-size=2", "--no-headers")
    assert [line.split()[0] for line in table.out.splitlines()] == [f"web-{index}" for index in range(7)]
