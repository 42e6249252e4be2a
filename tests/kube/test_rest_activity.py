"""`RestClient` reports its requests and watch events to an `Activity` (what an autojump clock waits for)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator
from typing import cast

from tests import polling

from karpy import clock
from karpy.kube import client, credentials, resources, rest
from karpy_emulator.apiserver import runner


class Recorder:
    """An `Activity` that remembers what it was told, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        self.log.append("enter")
        try:
            yield
        finally:
            self.log.append("exit")

    def touch(self) -> None:
        self.log.append("touch")


def _lease(name: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": "default"}}


async def test_every_request_is_busy_from_start_to_end(kube: runner.KubeAPIRunner) -> None:
    recorder = Recorder()
    cfg = credentials.bearer(kube.url, "t")
    async with rest.RestClient(cfg, clock=clock.SystemClock(), activity=recorder) as api:
        await api.create(resources.LEASES, _lease("a"))
        assert await api.get(resources.LEASES, "missing", namespace="default") is None
    assert recorder.log == ["enter", "exit", "enter", "exit"]


async def test_a_watch_is_busy_until_open_and_touches_at_every_event(kube: runner.KubeAPIRunner) -> None:
    recorder = Recorder()
    cfg = credentials.bearer(kube.url, "t")
    async with rest.RestClient(cfg, clock=clock.SystemClock(), activity=recorder) as api:
        _, version = await api.list(resources.LEASES, namespace="default")
        recorder.log.clear()
        # RestClient.watch is an async generator (typed as the protocol's AsyncIterator): closed explicitly below.
        stream = cast(
            AsyncGenerator[client.WatchEvent, None],
            api.watch(resources.LEASES, resource_version=version, namespace="default", timeout_seconds=5),
        )
        first = asyncio.ensure_future(anext(stream))
        # The watch opened (its request ended) before the write below.
        await polling.until(lambda: recorder.log == ["enter", "exit"])
        async with rest.RestClient(cfg, clock=clock.SystemClock()) as writer:
            await writer.create(resources.LEASES, _lease("b"))
        event = await first  # the watch's own timeoutSeconds ends it if the event never comes
        await stream.aclose()
    assert event.object["metadata"]["name"] == "b"
    assert recorder.log == ["enter", "exit", "touch"]
