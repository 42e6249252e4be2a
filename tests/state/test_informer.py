"""Informers over RestClient against the emulated API server: list, watch, re-list after 410, synced gate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest
from tests import builders, polling

from karpy import clock
from karpy.kube import client, credentials, resources, rest
from karpy.state import cluster, informer
from karpy_emulator.apiserver import runner, server

R = resources
NS = builders.NS


@pytest.fixture
async def api() -> AsyncIterator[rest.RestClient]:
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(seed=3)) as kube,
        rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as served,
    ):
        yield served


class Gated:
    """A KubeClient that holds one resource's LIST until released and can fail the next WATCH with 410."""

    def __init__(self, inner: rest.RestClient, *, held: resources.Resource | None = None) -> None:
        self.inner = inner
        self.held = held
        self.release = asyncio.Event()
        self.expire_next_watch_of: resources.Resource | None = None
        self.while_disconnected: Callable[[], Any] | None = None
        self.lists: list[str] = []
        self.watches: list[str] = []

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        return await self.inner.get(res, name, namespace=namespace)

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        if res == self.held:
            await self.release.wait()
        self.lists.append(str(res))
        return await self.inner.list(res, namespace=namespace)

    async def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        if res == self.expire_next_watch_of:
            self.expire_next_watch_of = None
            if self.while_disconnected is not None:
                await self.while_disconnected()
            raise client.Expired(410, "Expired", "too old resource version")
        self.watches.append(str(res))
        stream = self.inner.watch(
            res, resource_version=resource_version, namespace=namespace, timeout_seconds=timeout_seconds
        )
        try:
            async for event in stream:
                yield event
        finally:
            await client.aclose(stream)

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.inner.create(res, body)

    async def patch(
        self,
        res: resources.Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        return await self.inner.patch(res, name, patch, namespace=namespace, subresource=subresource)

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        return await self.inner.delete(res, name, namespace=namespace, grace_period_seconds=grace_period_seconds)

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        return await self.inner.evict(namespace, name)

    async def bind(self, namespace: str, name: str, node: str) -> None:
        await self.inner.bind(namespace, name, node)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_objects_written_through_the_api_show_up_in_the_views(api: rest.RestClient) -> None:
    await api.create(R.NODEPOOLS, builders.nodepool("default"))
    await api.create(R.NODES, builders.node("n1", provider_id="aws:///z/i-1"))
    await api.create(R.PODS, builders.pod("running", node="n1"))
    state = cluster.Cluster(clock=clock.SystemClock())
    task = asyncio.create_task(informer.run_informers(api, state, (R.NODEPOOLS, R.NODECLAIMS, R.NODES, R.PODS)))
    try:
        await polling.until(state.synced)
        assert [p.metadata.name for p in state.nodepools()] == ["default"]
        assert [p.name for p in state.pods_on("n1")] == ["running"]

        await api.create(R.PODS, builders.pod("pending"))
        unschedulable = {"status": builders.unschedulable({})["status"]}  # status is written through /status
        await api.patch(R.PODS, "pending", unschedulable, namespace=NS, subresource="status")
        await api.create(R.NODECLAIMS, builders.nodeclaim("default-x"))
        await api.patch(R.NODECLAIMS, "default-x", {"status": {"providerID": "aws:///z/i-1"}}, subresource="status")
        await api.create(R.NODEPOOLS, builders.nodepool("second", weight=5))
        await polling.until(lambda: [p.name for p in state.pending_pods()] == ["pending"])
        await polling.until(lambda: [n.nodeclaim_name for n in state.state_nodes()] == ["default-x"])
        await polling.until(lambda: len(state.nodepools()) == 2)

        await api.bind(NS, "pending", "n1")
        await api.delete(R.NODEPOOLS, "second")
        await api.delete(R.PODS, "running", namespace=NS, grace_period_seconds=0)
        await polling.until(lambda: [p.name for p in state.pods_on("n1")] == ["pending"])
        assert state.pending_pods() == []
        await polling.until(lambda: [p.metadata.name for p in state.nodepools()] == ["default"])
    finally:
        await _stop(task)


async def test_synced_only_after_every_informer_listed(api: rest.RestClient) -> None:
    gated = Gated(api, held=R.PODS)
    state = cluster.Cluster(clock=clock.SystemClock())
    task = asyncio.create_task(informer.run_informers(gated, state, (R.NODES, R.PODS)))
    try:
        await polling.until(lambda: gated.lists == ["nodes"])
        # The nodes informer has listed, applied and marked its LIST (it watches only after that); pods have not.
        await polling.until(lambda: gated.watches == ["nodes"])
        assert not state.synced()
        gated.release.set()
        await polling.until(state.synced)
    finally:
        await _stop(task)


async def test_a_410_relists_and_deletes_what_vanished_meanwhile(api: rest.RestClient) -> None:
    for name in ("keep", "gone"):
        await api.create(R.NODES, builders.node(name))
    gated = Gated(api)
    gated.expire_next_watch_of = R.NODES

    async def disconnected_changes() -> None:
        await api.delete(R.NODES, "gone")
        await api.create(R.NODES, builders.node("new"))

    gated.while_disconnected = disconnected_changes
    state = cluster.Cluster(clock=clock.SystemClock())
    task = asyncio.create_task(informer.run_informer(gated, state, R.NODES))
    try:
        await polling.until(lambda: gated.lists == ["nodes", "nodes"])
        await polling.until(lambda: [n.name for n in state.state_nodes()] == ["keep", "new"])
        await api.create(R.NODES, builders.node("later"))  # and the watch after the re-list is live
        await polling.until(lambda: [n.name for n in state.state_nodes()] == ["keep", "later", "new"])
    finally:
        await _stop(task)


async def test_watch_resumes_after_the_server_ends_the_stream(api: rest.RestClient) -> None:
    gated = Gated(api)
    state = cluster.Cluster(clock=clock.SystemClock())
    task = asyncio.create_task(informer.run_informer(gated, state, R.NODES, timeout_seconds=1))
    try:
        await polling.until(state.synced)
        await api.create(R.NODES, builders.node("n1"))
        await polling.until(lambda: [n.name for n in state.state_nodes()] == ["n1"])
        # The server ended the first watch (timeoutSeconds=1) and the informer opened a second one.
        await polling.until(lambda: gated.watches == ["nodes", "nodes"])
        await api.create(R.NODES, builders.node("n2"))
        await polling.until(lambda: len(state.state_nodes()) == 2)
        assert gated.lists == ["nodes"]  # resumed from its resourceVersion, no re-list
    finally:
        await _stop(task)
