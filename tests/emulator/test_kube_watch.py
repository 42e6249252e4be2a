"""Watch streams of FakeKubeAPI through the official client: resourceVersions, selectors, resumption, timeouts."""

from __future__ import annotations

import pathlib
import threading

import kubernetes
import pytest
from tests import builders

from karpy_emulator.apiserver import runner, server

NS = "default"


def _events(core: kubernetes.client.CoreV1Api, **params: object) -> list[tuple[str, str, int]]:
    """Every event until the server closes the stream (`timeout_seconds` bounds it)."""
    stream = kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, **params)
    return [(e["type"], e["object"].metadata.name, int(e["object"].metadata.resource_version)) for e in stream]


def test_watch_from_a_resource_version_replays_later_changes_in_order(core: kubernetes.client.CoreV1Api) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, builders.pod("p1"))
    core.create_namespaced_pod(NS, builders.pod("p2"))
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespaced_pod("p1", NS)
    events = _events(core, resource_version=start, timeout_seconds=1)
    assert [(kind, name) for kind, name, _ in events] == [
        ("ADDED", "p1"),
        ("ADDED", "p2"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]
    versions = [version for _, _, version in events]
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)  # every write got its own resourceVersion


def test_watch_without_a_version_starts_with_the_current_objects(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("p1"))
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"a": "b"}}})
    assert [(kind, name) for kind, name, _ in _events(core, timeout_seconds=1)] == [("ADDED", "p1")]


def test_watch_with_a_selector_sees_objects_enter_and_leave_it(core: kubernetes.client.CoreV1Api) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, builders.pod("p1"))
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"app": "a"}}})
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"extra": "x"}}})
    core.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"app": None}}})
    core.create_namespaced_pod(NS, builders.pod("other", labels={"app": "b"}))
    events = _events(core, resource_version=start, label_selector="app=a", timeout_seconds=1)
    assert [(kind, name) for kind, name, _ in events] == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]


def test_live_watch_receives_writes_made_while_it_streams(
    core: kubernetes.client.CoreV1Api, kube: runner.KubeAPIRunner
) -> None:
    watch = kubernetes.watch.Watch()
    seen: list[tuple[str, str]] = []
    stream = watch.stream(core.list_namespaced_pod, NS, timeout_seconds=5)
    core.create_namespaced_pod(NS, builders.pod("p1"))
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "ADDED":
            core.delete_namespaced_pod("p1", NS)
        if event["type"] == "DELETED":
            watch.stop()
    assert seen == [("ADDED", "p1"), ("DELETED", "p1")]


def test_watch_from_a_compacted_version_is_410_expired(tmp_path: pathlib.Path) -> None:
    api = server.FakeKubeAPI(watch_history=2)
    with (
        runner.KubeAPIRunner(api) as kube,
        kubernetes.config.new_client_from_config(str(kube.write_kubeconfig(tmp_path / "kubeconfig"))) as client,
    ):
        core = kubernetes.client.CoreV1Api(client)
        for name in ("p1", "p2", "p3", "p4"):
            core.create_namespaced_pod(NS, builders.pod(name))
        with pytest.raises(kubernetes.client.ApiException) as error:
            list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, resource_version="1", timeout_seconds=1))
        assert error.value.status == 410
        assert [name for _, name, _ in _events(core, resource_version="3", timeout_seconds=1)] == ["p3", "p4"]


def test_stopping_the_runner_ends_open_watches(kube: runner.KubeAPIRunner, kubeconfig: pathlib.Path) -> None:
    """A watch open at shutdown must not hold the server (or the test) up: stop() is bounded and returns."""
    with kubernetes.config.new_client_from_config(str(kubeconfig)) as client:
        core = kubernetes.client.CoreV1Api(client)
        seen = threading.Event()
        ended = threading.Event()

        def consume() -> None:
            for _ in kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=30):
                seen.set()
            ended.set()

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        core.create_namespaced_pod(NS, builders.pod("p1"))
        # Stop only once the watch is open and has delivered: stopping before the consumer's request reaches the
        # server would test a refused connection, not an open watch (and fail the thread).
        assert seen.wait(10)
        kube.stop()
        consumer.join(10)
        assert ended.is_set()
