"""`RestClient` against the emulated API server's fault layer (`karpy_emulator.apiserver.faults`): what it sends
again (`karpy.kube.retry`), after how long on its clock, and what reaches the caller."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

import pytest
from tests import builders, polling

from karpy import clock
from karpy.kube import client, credentials, resources, rest, retry
from karpy_emulator import autojump
from karpy_emulator.apiserver import faults, runner

USER = "controller"
Kind = faults.Kind


class RecordingClock:
    """The client's backoff clock: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def waits() -> RecordingClock:
    return RecordingClock()


@pytest.fixture
async def api(kube: runner.KubeAPIRunner, waits: RecordingClock) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(
        credentials.bearer(kube.url, USER), clock=clock.SystemClock(), backoff_clock=waits, rng=random.Random(5)
    ) as kube_client:
        yield kube_client


async def inject(kube: runner.KubeAPIRunner, *kinds: Kind, times: int, **mix: object) -> faults.Faults:
    layer = faults.Faults(
        faults.Mix(rate=1.0, users=frozenset({USER}), kinds=frozenset(kinds), limit=times, **mix)  # type: ignore[arg-type]
    )

    async def install() -> None:
        kube.api.fault_layer = layer

    await kube.read(lambda: None)  # the server is up
    await asyncio.to_thread(kube.call, install)
    return layer


async def test_a_throttle_is_waited_out_for_its_retry_after_with_jitter(
    kube: runner.KubeAPIRunner, api: rest.RestClient, waits: RecordingClock
) -> None:
    layer = await inject(kube, Kind.THROTTLED, times=2, retry_after=3)
    created = await api.create(resources.NODES, builders.node("n1"))  # a write: a 429 was never acted on
    assert created["metadata"]["name"] == "n1"
    assert layer.hits == {Kind.THROTTLED: 2}
    assert api.retried == 2
    assert len(waits.waits) == 2
    assert all(3.0 <= wait <= 3.0 * 1.2 for wait in waits.waits), waits.waits
    assert waits.waits[0] != waits.waits[1]  # jittered


@pytest.mark.parametrize("kind", [Kind.SERVER_ERROR, Kind.UNAVAILABLE, Kind.RESET])
async def test_a_read_is_sent_again_after_a_failure_with_a_growing_jittered_backoff(
    kube: runner.KubeAPIRunner, api: rest.RestClient, waits: RecordingClock, kind: Kind
) -> None:
    await api.create(resources.NODES, builders.node("n1"))
    layer = await inject(kube, kind, times=3)
    assert await api.get(resources.NODES, "n1") is not None
    assert layer.hits.total() == 3
    # aiohttp itself sends an idempotent request again once when a pooled connection turns out closed, so a reset
    # may cost the client fewer than three retries of its own.
    assert 1 <= api.retried <= 3
    assert len(waits.waits) == api.retried
    for attempt, wait in enumerate(waits.waits):
        step = 0.5 * 2**attempt
        assert step / 2 <= wait <= step, (attempt, wait)


@pytest.mark.parametrize(("kind", "status"), [(Kind.SERVER_ERROR, 500), (Kind.UNAVAILABLE, 503), (Kind.CONFLICT, 409)])
async def test_a_failed_write_goes_to_its_caller_unrepeated(
    kube: runner.KubeAPIRunner, api: rest.RestClient, kind: Kind, status: int
) -> None:
    await api.create(resources.NODES, builders.node("n1"))
    await inject(kube, kind, times=1)
    with pytest.raises(client.KubeError) as failed:
        await api.patch(resources.NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    assert failed.value.status == status
    assert api.retried == 0
    node = await api.get(resources.NODES, "n1")
    assert node is not None
    assert "a" not in node["metadata"].get("labels", {})  # the fault answered in place of the server


async def test_a_write_whose_connection_dropped_raises_and_is_not_applied(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    await inject(kube, Kind.RESET, times=1)
    with pytest.raises(client.Disconnected):
        await api.create(resources.NODES, builders.node("n1"))
    assert api.retried == 0
    assert await api.get(resources.NODES, "n1") is None


async def test_an_eviction_throttle_is_the_budgets_answer_not_retried(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    await api.create(resources.PODS, builders.pod("p1", node="n1"))
    await inject(kube, Kind.THROTTLED, times=1)
    assert await api.evict(builders.NS, "p1") is client.EvictionOutcome.BLOCKED
    assert api.retried == 0


async def test_a_server_asking_for_too_long_a_wait_gets_its_error_passed_on(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    await inject(kube, Kind.THROTTLED, times=1, retry_after=3600)
    with pytest.raises(client.TooManyRequests):
        await api.list(resources.NODES)


async def test_retries_give_up_after_the_policy_s_count(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    layer = await inject(kube, Kind.SERVER_ERROR, times=100)
    with pytest.raises(client.KubeError) as failed:
        await api.list(resources.NODES)
    assert failed.value.status == 500
    assert layer.hits[Kind.SERVER_ERROR] == 11  # the first attempt and 10 retries (client-go's maxRetries)


async def test_opening_a_watch_is_retried_and_a_410_on_resume_is_the_caller_s(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    await api.create(resources.NODES, builders.node("n1"))
    _, version = await api.list(resources.NODES)
    await inject(kube, Kind.UNAVAILABLE, times=2)
    async with contextlib.aclosing(api.watch(resources.NODES, resource_version="", timeout_seconds=5)) as stream:
        first = await anext(stream)
    assert first.object["metadata"]["name"] == "n1"
    assert api.retried == 2
    await inject(kube, Kind.EXPIRED, times=1)
    with pytest.raises(client.Expired):
        async for _ in api.watch(resources.NODES, resource_version=version, timeout_seconds=5):
            pass


async def test_a_closed_watch_ends_the_stream_early(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    for i in range(6):
        await api.create(resources.NODES, builders.node(f"n{i}"))
    await inject(kube, Kind.WATCH_CLOSED, times=1, seed=2)
    seen = [event async for event in api.watch(resources.NODES, resource_version="", timeout_seconds=30)]
    assert 1 <= len(seen) <= 4  # the stream ended before the 30 s and before the sixth node
    assert [e.object["metadata"]["name"] for e in seen] == [f"n{i}" for i in range(len(seen))]


async def test_only_the_chosen_client_is_hit(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    layer = await inject(kube, Kind.SERVER_ERROR, times=100)
    async with rest.RestClient(
        credentials.bearer(kube.url, "someone-else"), clock=clock.SystemClock(), retries=retry.NO_RETRIES
    ) as other:
        await other.create(resources.NODES, builders.node("n1"))
        assert [n["metadata"]["name"] for n in (await other.list(resources.NODES))[0]] == ["n1"]
    assert layer.hits.total() == 0


async def test_a_slow_answer_waits_on_the_clock_off_the_books_until_its_client_gives_up(
    kube: runner.KubeAPIRunner,
) -> None:
    # The client's request counts as in flight; the server's slow wait offsets it, so the autojump clock may move.
    # A client that gives up meanwhile must not leave the offset behind: the count would stay below zero and the
    # clock would never move again.
    tracker = autojump.Tracker()
    never = asyncio.Event()

    async def sleep_forever(_: float) -> None:
        await never.wait()

    mix = faults.Mix(rate=1.0, users=frozenset({USER}), kinds=frozenset({Kind.SLOW}))
    layer = faults.Faults(mix, sleep=sleep_forever, activity=tracker)

    async def install() -> None:
        kube.api.fault_layer = layer

    await asyncio.to_thread(kube.call, install)
    async with rest.RestClient(credentials.bearer(kube.url, USER), clock=clock.SystemClock(), activity=tracker) as api:
        request = asyncio.create_task(api.list(resources.NODES))
        await polling.until(lambda: layer.hits[Kind.SLOW] == 1 and tracker.snapshot()[0] == 0)
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
        await polling.until(lambda: tracker.snapshot()[0] == 0)
        assert tracker.snapshot()[0] == 0


async def test_each_class_of_request_takes_its_fault_kinds_in_turn_its_own_kind_first(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    await api.create(resources.NODES, builders.node("n1"))
    everything = frozenset(Kind) - {Kind.SLOW}  # a slow answer would wait on the server's real clock
    layer = await inject(kube, *everything, times=5)
    served: list[Kind] = []
    for value in range(5):
        before = layer.hits.copy()
        with contextlib.suppress(client.KubeError, client.Disconnected):
            await api.patch(resources.NODES, "n1", {"metadata": {"labels": {"a": str(value)}}})
        served.extend((layer.hits - before).elements())
    assert served == [Kind.CONFLICT, Kind.SERVER_ERROR, Kind.UNAVAILABLE, Kind.THROTTLED, Kind.RESET]
