"""Fixtures of the sim tests: a FakeKubeAPI served from a thread, a kubeconfig, and the official client on it."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator import reads
from karpy_emulator.apiserver import runner, server


@pytest.fixture
def kube() -> Iterator[runner.KubeAPIRunner]:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, clock=lambda: 1_700_000_000.0)) as served:
        yield served


@pytest.fixture
def kubeconfig(kube: runner.KubeAPIRunner, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    # The client reads $KUBECONFIG once, at import; Kopf's default login goes through this constant.
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    return path


@pytest.fixture
def api_client(kubeconfig: pathlib.Path) -> Iterator[kubernetes.client.ApiClient]:
    with kubernetes.config.new_client_from_config(str(kubeconfig)) as client:
        yield client


@pytest.fixture
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def policy(api_client: kubernetes.client.ApiClient) -> kubernetes.client.PolicyV1Api:
    return kubernetes.client.PolicyV1Api(api_client)


@pytest.fixture
def kubectl_server() -> Iterator[runner.KubeAPIRunner]:
    """The API server as a cluster runs it (see `kubectl.served_api`), for the kubectl tests."""
    with runner.KubeAPIRunner(emulator_kubectl.served_api()) as served:
        yield served


@pytest.fixture
def kubectl(kubectl_server: runner.KubeAPIRunner, tmp_path: pathlib.Path) -> emulator_kubectl.Kubectl:
    """The real kubectl against `kubectl_server`."""
    return emulator_kubectl.factory(tmp_path)(kubectl_server)


@pytest.fixture(params=["feed", "client"])
def stand_in_reader(request: pytest.FixtureRequest, kube: runner.KubeAPIRunner) -> reads.Reader | None:
    """What a controller stand-in reads through: the store and its change history (`reads.StoreReader`), as an
    emulated cluster wires it, or None (its own client: a LIST per read, each refresh compared with the last)."""
    return reads.StoreReader(kube) if request.param == "feed" else None


@pytest.fixture
def store_lists(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resources the store is asked to list in process (`FakeKubeAPI.snapshot`) from now on, in order, by
    plural: what an informer-fed reader must not do after its first list."""
    listed: list[str] = []
    snapshot = server.FakeKubeAPI.snapshot

    def counted(self: server.FakeKubeAPI, resource: Any, watch: Any) -> tuple[list[dict[str, Any]], str]:
        listed.append(str(resource.plural))
        return snapshot(self, resource, watch)

    monkeypatch.setattr(server.FakeKubeAPI, "snapshot", counted)
    return listed
