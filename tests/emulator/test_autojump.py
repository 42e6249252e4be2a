"""The autojump clock: time moves to the next deadline only while nothing tracked is in flight."""

from __future__ import annotations

import asyncio
import threading

import pytest

from karpy import clock as karpy_clock
from karpy_emulator import autojump

REAL_BOUND = 5.0
"""Real seconds any single wait here may take at most (a loaded CI machine included). The autojump clock's promise is
about real time (an hour of virtual sleep costs one idle window, 20 ms), so these tests, unlike all others, bound
real time: by 250 times what the jump takes."""


async def test_a_long_sleep_takes_no_real_time_and_ends_exactly_at_its_deadline() -> None:
    clock = autojump.AutojumpClock(start=1000.0)
    async with clock.driving():
        await asyncio.wait_for(clock.sleep(3600.0), timeout=REAL_BOUND)
    assert clock.now() == 1000.0 + 3600.0


async def test_sleepers_wake_in_deadline_order_with_now_at_each_deadline() -> None:
    clock = autojump.AutojumpClock(start=0.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    async with clock.driving():
        await asyncio.wait_for(asyncio.gather(sleeper("c", 30.0), sleeper("a", 10.0), sleeper("b", 20.0)), REAL_BOUND)
    assert woke == [("a", 10.0), ("b", 20.0), ("c", 30.0)]
    assert clock.jumps == 3


async def test_time_stands_still_while_a_worker_thread_call_is_in_flight() -> None:
    clock = autojump.AutojumpClock(start=0.0)
    release = threading.Event()
    async with clock.driving():
        call = asyncio.create_task(asyncio.to_thread(release.wait, REAL_BOUND))
        sleeper = asyncio.create_task(clock.sleep(60.0))
        # Many idle windows pass in real time; the call in flight keeps the sleeper parked.
        done, _ = await asyncio.wait({sleeper}, timeout=20 * autojump.IDLE_SECONDS)
        assert not done
        assert clock.now() == 0.0
        release.set()
        assert await call is True
        await asyncio.wait_for(sleeper, timeout=REAL_BOUND)
    assert clock.now() == 60.0


async def test_time_stands_still_while_reported_work_is_busy() -> None:
    clock = autojump.AutojumpClock(start=0.0)
    async with clock.driving():
        sleeper = asyncio.create_task(clock.sleep(5.0))
        with clock.activity.busy():
            done, _ = await asyncio.wait({sleeper}, timeout=20 * autojump.IDLE_SECONDS)
            assert not done
        await asyncio.wait_for(sleeper, timeout=REAL_BOUND)
    assert clock.now() == 5.0


def test_the_tracker_counts_calls_in_flight_and_stamps_every_event() -> None:
    tracker = autojump.Tracker()
    assert tracker.snapshot() == (0, 0)
    with tracker.busy():
        assert tracker.snapshot() == (1, 1)
        tracker.touch()
        assert tracker.snapshot() == (1, 2)
    assert tracker.snapshot() == (0, 3)
    with pytest.raises(RuntimeError), tracker.busy():
        raise RuntimeError("a failed call still ends")
    assert tracker.snapshot()[0] == 0


def test_only_the_autojump_clock_tracks_activity() -> None:
    clock = autojump.AutojumpClock()
    assert autojump.activity_of(clock) is clock.activity
    assert autojump.activity_of(karpy_clock.SystemClock()) is karpy_clock.UNTRACKED
    assert autojump.activity_of(karpy_clock.ManualClock()) is karpy_clock.UNTRACKED


def test_the_idle_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="idle must be positive"):
        autojump.AutojumpClock(idle=0.0)
