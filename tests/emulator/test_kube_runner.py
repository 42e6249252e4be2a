"""The threaded runner: usable from sync code and from an asyncio program, bounded start/stop, no leaked threads."""

from __future__ import annotations

import pathlib
import threading

import aiohttp
import pytest
import yaml

from karpy_emulator.apiserver import runner, server


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fake-kube-api-")]


async def test_async_context_manager_serves_an_asyncio_program() -> None:
    async with runner.KubeAPIRunner() as kube, aiohttp.ClientSession() as session:
        async with session.post(
            f"{kube.url}/api/v1/namespaces/default/pods", json={"metadata": {"name": "p1"}}
        ) as created:
            assert created.status == 201
        async with session.get(f"{kube.url}/api/v1/namespaces/default/pods") as listed:
            body = await listed.json()
        assert [item["metadata"]["name"] for item in body["items"]] == ["p1"]
    assert not _server_threads()


def test_kubeconfig_points_at_the_server(kube: runner.KubeAPIRunner, tmp_path: pathlib.Path) -> None:
    path = kube.write_kubeconfig(tmp_path / "kubeconfig", context="demo")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "demo"
    assert config["clusters"][0]["cluster"]["server"] == kube.url


def test_store_is_reachable_from_the_test_thread(kube: runner.KubeAPIRunner) -> None:
    async def seeded() -> int:
        return kube.api.resource_version

    assert kube.call(seeded) == 1
    assert kube.api.live("v1/pods", "default", "ghost") is None


def test_a_busy_port_fails_start_cleanly() -> None:
    with runner.KubeAPIRunner() as first:
        second = runner.KubeAPIRunner(server.FakeKubeAPI(), port=first.port)
        with pytest.raises(RuntimeError, match="failed to start"):
            second.start()
    assert not _server_threads()
