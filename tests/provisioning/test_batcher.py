"""Batch window: idle / max / first-trigger timing and UID de-duplication, on virtual time."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles

from karpy.clock import ManualClock
from karpy.provisioning import batcher

SETTINGS = batcher.WindowSettings()  # idle 1 s, max 10 s, first wait 1 s


@pytest.mark.parametrize(
    ("opened", "last", "expected"),
    [
        (0.0, 0.0, 1.0),  # lone trigger: idle timeout
        (0.0, 5.5, 6.5),  # last new trigger at 5.5: idle from there
        (0.0, 9.5, 10.0),  # idle would end at 10.5: the max caps it
        (0.0, 20.0, 10.0),  # never past opened + max
    ],
)
def test_closes_at(opened: float, last: float, expected: float) -> None:
    assert batcher.closes_at(opened, last, settings=SETTINGS) == expected


async def _start(b: batcher.Batcher, clock: ManualClock) -> asyncio.Task[bool]:
    task = asyncio.ensure_future(b.wait())
    await clock.settle()
    return task


async def test_no_trigger_gives_up_after_first_wait() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    task = await _start(b, clock)
    await clock.run_for(0.9)
    assert not task.done()
    await clock.run_for(0.1)
    assert task.done()
    assert task.result() is False


async def test_lone_trigger_closes_after_idle() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    task = await _start(b, clock)
    await clock.run_for(0.5)
    b.trigger("a")
    await clock.run_for(0.99)
    assert not task.done()
    await clock.run_for(0.01)
    assert task.result() is True
    assert clock.now() == pytest.approx(1.5)


async def test_steady_triggers_close_at_max_duration() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    b.trigger("p-0")  # before wait: the buffered trigger opens the window at once
    task = await _start(b, clock)
    for i in range(1, 40):
        await clock.run_for(0.5)
        if task.done():
            break
        b.trigger(f"p-{i}")
    assert task.result() is True
    assert clock.now() == pytest.approx(10.0)
    assert clock.sleepers == 0  # no timer left behind


async def test_duplicate_uid_does_not_rearm_idle() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    b.trigger("a")
    task = await _start(b, clock)
    await clock.run_for(0.9)
    b.trigger("a")  # the same pod re-queued: ignored
    await clock.run_for(0.1)
    assert task.done(), "a duplicate UID extended the window"
    await clock.run_for(0.0)
    # A new UID inside the window would have extended it; after the window the same UID counts again.
    b.trigger("a")
    task = await _start(b, clock)
    await clock.run_for(1.0)
    assert task.result() is True


async def test_new_uid_extends_window() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    b.trigger("a")
    task = await _start(b, clock)
    await clock.run_for(0.9)
    b.trigger("b")
    await clock.run_for(0.9)
    assert not task.done()
    await clock.run_for(0.1)
    assert task.result() is True
    assert clock.now() == pytest.approx(1.9)


async def test_cancelled_wait_leaves_no_sleepers() -> None:
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    b.trigger("a")
    task = await _start(b, clock)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0


def _model(triggers: list[tuple[float, str]]) -> float | None:
    """Reference: when the window closes for triggers at (time, uid), wait() starting at 0; None = gave up."""
    if not triggers or triggers[0][0] >= SETTINGS.first_wait:  # at the deadline: too late, as below
        return None
    opened = triggers[0][0]
    seen, last = {triggers[0][1]}, opened
    for when, uid in triggers[1:]:
        if when >= batcher.closes_at(opened, last, settings=SETTINGS):
            break
        if uid not in seen:
            seen.add(uid)
            last = when
    return batcher.closes_at(opened, last, settings=SETTINGS)


# Trigger times on a 0.125 s grid: first one within 1.5 s, then strictly increasing gaps of up to 1.5 s, so windows
# that close by idle, by max duration, and never-opening waits all occur. A trigger landing exactly on a deadline
# counts as too late in both the model (`when >= closes_at`) and the scenario (the clock wakes the due sleeper
# before the test triggers).
_times = st.tuples(st.integers(0, 12), st.lists(st.integers(1, 12), max_size=25)).map(
    lambda first_gaps: [0.125 * sum((first_gaps[0], *first_gaps[1][:i])) for i in range(len(first_gaps[1]) + 1)]
)


@settings(max_examples=hypothesis_profiles.examples(80), deadline=None)
@given(times=_times, uids=st.lists(st.sampled_from("abc"), min_size=26, max_size=26))
def test_window_matches_reference_model(times: list[float], uids: list[str]) -> None:
    triggers = list(zip(times, uids, strict=False))

    async def scenario() -> float | None:
        clock = ManualClock(0.0)
        b = batcher.Batcher(clock)

        async def closed_at() -> float | None:
            return clock.now() if await b.wait() else None

        task = asyncio.ensure_future(closed_at())
        await clock.settle()
        for when, uid in triggers:
            if task.done():
                break
            await clock.run_for(when - clock.now())
            if not task.done():
                b.trigger(uid)
        while not task.done():
            await clock.run_for(0.125)
        return task.result()

    got = asyncio.run(scenario())
    expected = _model(triggers)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("steps", range(12))
async def test_a_cancelled_wait_ends_cancelled_at_every_point(steps: int) -> None:
    """Cancelled `steps` loop turns after a trigger, wherever that lands (asleep, or stopping its own waiters), the
    wait ends cancelled: a stopped controller's provisioning loop must not run on."""
    clock = ManualClock(0.0)
    b = batcher.Batcher(clock)
    task = await _start(b, clock)
    b.trigger("a")
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    for _ in range(20):
        await asyncio.sleep(0)
    assert task.cancelled()
