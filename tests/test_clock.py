"""ManualClock: virtual time that wakes sleepers in deadline order; SystemClock basics."""

from __future__ import annotations

import asyncio

import pytest

from karpy import clock


async def _sleep_and_log(c: clock.ManualClock, seconds: float, name: str, log: list[tuple[str, float]]) -> None:
    await c.sleep(seconds)
    log.append((name, c.now()))


async def test_advance_wakes_due_sleepers_in_deadline_order_and_leaves_later_ones() -> None:
    c = clock.ManualClock(100.0)
    log: list[tuple[str, float]] = []
    tasks = [asyncio.create_task(_sleep_and_log(c, s, n, log)) for n, s in (("c", 30), ("a", 10), ("b", 20))]
    await c.settle()
    assert c.sleepers == 3
    assert c.advance(25) == 2
    await c.settle()
    assert [name for name, _ in log] == ["a", "b"]
    assert c.now() == 125.0
    assert c.next_deadline() == 130.0
    c.advance(5)
    await asyncio.gather(*tasks)
    assert [name for name, _ in log] == ["a", "b", "c"]


async def test_equal_deadlines_wake_in_the_order_they_slept() -> None:
    c = clock.ManualClock()
    log: list[tuple[str, float]] = []
    tasks = [asyncio.create_task(_sleep_and_log(c, 5, n, log)) for n in "xyz"]
    await c.settle()
    c.advance(5)
    await asyncio.gather(*tasks)
    assert [name for name, _ in log] == ["x", "y", "z"]


async def test_run_for_wakes_chained_sleeps_at_their_own_deadlines() -> None:
    c = clock.ManualClock(0.0)
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(5):
            await c.sleep(2)
            ticks.append(c.now())

    task = asyncio.create_task(ticker())
    await c.run_for(7)
    assert ticks == [2.0, 4.0, 6.0]  # `advance(7)` alone would wake only the first
    assert c.now() == 7.0
    await c.run_for(10)
    await task
    assert ticks == [2.0, 4.0, 6.0, 8.0, 10.0]


async def test_run_until_returns_the_virtual_time_it_took_or_times_out() -> None:
    c = clock.ManualClock(0.0)
    flag: list[bool] = []

    async def later() -> None:
        await c.sleep(300)
        flag.append(True)

    task = asyncio.create_task(later())
    assert await c.run_until(lambda: bool(flag), limit=600) == 300.0
    await task
    with pytest.raises(TimeoutError, match="still false"):
        await c.run_until(lambda: False, limit=10)  # nothing sleeps: time cannot help


async def test_cancelled_sleepers_are_forgotten() -> None:
    c = clock.ManualClock()
    task = asyncio.create_task(c.sleep(10))
    await c.settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert c.sleepers == 0
    assert c.next_deadline() is None
    assert c.advance(20) == 0


async def test_zero_sleep_yields_without_parking_and_time_never_goes_back() -> None:
    c = clock.ManualClock(5.0)
    await c.sleep(0)
    assert c.sleepers == 0
    with pytest.raises(ValueError, match="backwards"):
        c.advance(-1)
    c.set(10.0)
    assert c.now() == 10.0


async def test_system_clock_reads_the_wall_clock_and_sleeps_briefly() -> None:
    import time

    system = clock.SystemClock()
    # The one test that reads the wall clock: it is the unit under test. The bound is a lower one, which no load
    # of the machine can break (a sleep never ends early).
    before = time.time()
    await system.sleep(0.01)
    assert system.now() >= before + 0.005
    await system.sleep(-1)  # negative is a no-op, not an error
