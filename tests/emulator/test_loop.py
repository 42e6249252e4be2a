"""sim.loop.gather_limited: bounded concurrency, results in order, the first failure raised and the rest cancelled."""

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
