"""loop.gather_limited: bounded concurrency, results in order, the first failure raised and the rest cancelled;
loop.slow_start_batch: batches of 1, 2, 4, ... side by side, stopping after the first batch with a failure;
loop.every with a watch: a pass only on the ticks after a change, or when the stand-in says work is due."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest

from karpy import clock as karpy_clock
from karpy.kube import client, resources
from karpy_emulator import loop


async def test_results_come_in_call_order_with_at_most_limit_in_flight() -> None:
    running, peak = 0, 0

    async def call(value: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5 - value % 5):  # later calls finish first: fewer turns of the loop, no real time
            await asyncio.sleep(0)
        running -= 1
        return value * 10

    results = await loop.gather_limited([functools.partial(call, i) for i in range(20)], limit=4)
    assert results == [i * 10 for i in range(20)]
    assert peak == 4


async def test_the_first_failure_is_raised_as_is_and_cancels_the_calls_still_running() -> None:
    cancelled: list[int] = []

    async def fails() -> int:
        raise client.NotFound(404, "NotFound", "gone")

    async def slow(value: int) -> int:
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            cancelled.append(value)
            raise
        return value

    calls: list[Callable[[], Awaitable[int]]] = [functools.partial(slow, 1), fails, functools.partial(slow, 2)]
    with pytest.raises(client.NotFound):  # not an ExceptionGroup: the stand-in loop logs KubeErrors
        await loop.gather_limited(calls, limit=3)
    assert sorted(cancelled) == [1, 2]


async def test_no_calls_no_results() -> None:
    assert await loop.gather_limited([], limit=16) == []


async def test_slow_start_batches_double_and_each_runs_side_by_side() -> None:
    finished = 0
    seen_at_start: list[int] = []  # how many calls had finished when each call started

    async def call() -> int:
        nonlocal finished
        seen_at_start.append(finished)
        await asyncio.sleep(0)  # every call of a batch starts before any of them finishes
        finished += 1
        return finished

    done, error = await loop.slow_start_batch(10, call)
    assert error is None
    assert len(done) == 10
    assert seen_at_start == [0, 1, 1, 3, 3, 3, 3, 7, 7, 7]  # batches of 1, 2, 4, then the 3 left


async def test_slow_start_stops_after_the_batch_with_a_failure() -> None:
    calls = 0

    async def call() -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise client.Conflict(409, "Conflict", "no")
        return calls

    done, error = await loop.slow_start_batch(10, call)
    assert isinstance(error, client.Conflict)
    assert done == [1, 2]  # the first batch and the second's success; no third batch started
    assert calls == 3


class _Feed:
    """A change feed whose revision the test moves."""

    def __init__(self) -> None:
        self.revision = 0
        self.asked: list[tuple[str, ...]] = []

    async def changed_at(self, watched: Sequence[resources.Resource]) -> int:
        self.asked.append(tuple(r.plural for r in watched))
        return self.revision


@contextlib.asynccontextmanager
async def _running(watched: Awaitable[object]) -> AsyncIterator[None]:
    task = asyncio.ensure_future(watched)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_watched_loop_passes_only_after_a_change_or_when_due() -> None:
    clock = karpy_clock.ManualClock()
    feed = _Feed()
    passes: list[float] = []
    due_at: list[float] = []

    async def sync() -> None:
        passes.append(clock.now())

    async def due(now: float) -> bool:
        return now in due_at

    watch = loop.watch(feed, [resources.PODS, resources.NODES], due=due)
    assert watch is not None
    start = clock.now()
    async with _running(loop.every(1.0, sync, clock=clock, name="test", watch=watch)):
        await clock.run_for(2.5)  # the first tick passes (nothing seen yet), ticks 1 and 2 are idle
        feed.revision = 7
        due_at.append(start + 5)
        await clock.run_for(4)  # tick 3 sees the write; tick 4 is idle; tick 5 is due; tick 6 is idle
    assert [p - start for p in passes] == [0, 3, 5]
    assert set(feed.asked) == {("pods", "nodes")}


async def test_a_failed_pass_is_tried_again_on_the_next_tick_though_nothing_changed() -> None:
    clock = karpy_clock.ManualClock()
    passes = 0

    async def sync() -> None:
        nonlocal passes
        passes += 1
        if passes == 1:
            raise client.Conflict(409, "Conflict", "no")

    watch = loop.watch(_Feed(), [resources.PODS])
    async with _running(loop.every(1.0, sync, clock=clock, name="test", watch=watch)):
        await clock.run_for(2.5)
    assert passes == 2  # the failure, its retry; then idle


def test_a_plain_client_is_no_change_feed() -> None:
    assert loop.watch(object(), [resources.PODS]) is None
