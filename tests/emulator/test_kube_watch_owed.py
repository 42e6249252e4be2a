"""A change the API server owes a watch stream is work in flight for the autojump clock (`apiserver.deliveries`), from
the write that makes it until the stream has sent it: time must not jump on while a controller's watch event sits
on a server thread that waits for a core."""

from __future__ import annotations

import asyncio
from typing import Any

import kmock
from tests import builders

from karpy import clock
from karpy.kube import client, credentials, resources, rest
from karpy_emulator import autojump
from karpy_emulator.apiserver import runner, server

NS = "default"
PODS = kmock.resource("v1/pods")


def _in_flight(tracker: autojump.Tracker) -> int:
    return tracker.snapshot()[0]


async def test_a_change_is_in_flight_until_the_watch_stream_has_sent_it() -> None:
    tracker = autojump.Tracker()
    api = server.FakeKubeAPI(seed=7, clock=lambda: 1_700_000_000.0, activity=tracker)

    async def add_and_count(name: str) -> int:
        """A write on the server's loop, and what is in flight right after it: nothing else runs on that loop until
        this returns, as when the server's thread waits for a core between answering a write and streaming it."""
        pod: dict[str, Any] = builders.pod(name)
        pod["metadata"]["resourceVersion"] = str(api.resource_version + 1)
        async with api._db.lock:
            await api._db.add((PODS, NS, name), pod)
        return _in_flight(tracker)

    with runner.KubeAPIRunner(api) as kube:
        async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as kube_client:
            await kube_client.create(resources.PODS, builders.pod("first"))
            stream = kube_client.watch(resources.PODS, resource_version="", namespace=NS)
            try:
                first = await anext(stream)  # the watch's initial state: it is subscribed from here on
                assert first.object["metadata"]["name"] == "first"
                assert _in_flight(tracker) == 0

                assert await asyncio.to_thread(kube.call, lambda: add_and_count("second")) == 1
                second = await anext(stream)
                assert (second.type, second.object["metadata"]["name"]) == (client.ADDED, "second")
                assert _in_flight(tracker) == 0  # sent: the client has it
            finally:
                await client.aclose(stream)
