"""loop.gather_limited: bounded concurrency, results in order, the first failure raised and the rest cancelled;
loop.slow_start_batch: batches of 1, 2, 4, ... side by side, stopping after the first batch with a failure."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import pytest

from karpy.kube import client
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
