"""The request batcher's windows, buckets and outcomes, on a manual clock (aws: pkg/batcher/suite_test.go)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from karpy import clock as karpy_clock
from karpy.cloudprovider.aws import batcher

WINDOW = batcher.Window(idle=0.1, max_duration=1.0, max_items=5)


class Recorder:
    """An executor that answers each request with its upper-cased self (or fails those named "bad"), and the
    merged calls it was given."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.observed: list[tuple[str, int, float]] = []
        self.gate: asyncio.Event | None = None

    async def execute(self, requests: list[str]) -> Sequence[str | BaseException]:
        self.calls.append(list(requests))
        if self.gate is not None:
            await self.gate.wait()
        return [ValueError(r) if r == "bad" else r.upper() for r in requests]

    def observe(self, name: str, size: int, seconds: float) -> None:
        self.observed.append((name, size, seconds))


@pytest.fixture
def clock() -> karpy_clock.ManualClock:
    return karpy_clock.ManualClock()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def make(
    clock: karpy_clock.ManualClock, recorder: Recorder, window: batcher.Window = WINDOW
) -> batcher.Batcher[str, str]:
    return batcher.Batcher(
        "test",
        window,
        key=lambda request: request[:1],  # requests starting with the same letter merge
        execute=recorder.execute,
        now=clock.now,
        sleep=clock.sleep,
        observe=recorder.observe,
    )


async def test_requests_within_the_idle_window_are_one_call_and_each_gets_its_own_outcome(
    clock: karpy_clock.ManualClock, recorder: Recorder
) -> None:
    batch = make(clock, recorder)
    first = asyncio.create_task(batch.add("a1"))
    await clock.settle()
    clock.advance(0.09)  # still within 100 ms of the last request
    second = asyncio.create_task(batch.add("a2"))
    await clock.settle()
    assert recorder.calls == []
    clock.advance(0.09)  # 100 ms after the first, but the second re-armed the idle timer
    await clock.settle()
    assert recorder.calls == []
    clock.advance(0.01)
    await clock.settle()
    assert recorder.calls == [["a1", "a2"]]
    assert (await first, await second) == ("A1", "A2")
    assert recorder.observed == [("test", 2, pytest.approx(0.19))]


async def test_different_keys_are_different_calls(clock: karpy_clock.ManualClock, recorder: Recorder) -> None:
    batch = make(clock, recorder)
    tasks = [asyncio.create_task(batch.add(r)) for r in ("a1", "b1", "a2", "a3", "b2")]
    await clock.run_for(0.1)
    assert sorted(recorder.calls) == [["a1", "a2", "a3"], ["b1", "b2"]]
    assert await asyncio.gather(*tasks) == ["A1", "B1", "A2", "A3", "B2"]


async def test_a_busy_window_closes_at_its_maximum(clock: karpy_clock.ManualClock, recorder: Recorder) -> None:
    batch = make(clock, recorder, batcher.Window(idle=0.1, max_duration=0.35, max_items=100))
    tasks = []
    for i in range(6):  # a request every 80 ms: the idle timer never runs out
        tasks.append(asyncio.create_task(batch.add(f"a{i}")))
        await clock.run_for(0.08)
    # 0.35 s after the first: a0..a4 went (arrived at 0, .08, .16, .24, .32), a5 (at .40) opened a new window
    assert recorder.calls == [["a0", "a1", "a2", "a3", "a4"]]
    await clock.run_for(0.1)
    assert recorder.calls == [["a0", "a1", "a2", "a3", "a4"], ["a5"]]
    await asyncio.gather(*tasks)


async def test_a_full_bucket_goes_at_once(clock: karpy_clock.ManualClock, recorder: Recorder) -> None:
    batch = make(clock, recorder)
    tasks = [asyncio.create_task(batch.add(f"a{i}")) for i in range(7)]
    await clock.settle()
    assert recorder.calls == [["a0", "a1", "a2", "a3", "a4"]]  # max_items, without waiting for the window
    assert clock.next_deadline() == pytest.approx(clock.now() + 0.1)  # only a5/a6's window is left
    await clock.run_for(0.1)
    assert recorder.calls[1:] == [["a5", "a6"]]
    await asyncio.gather(*tasks)


async def test_a_failed_request_fails_only_its_caller(clock: karpy_clock.ManualClock, recorder: Recorder) -> None:
    batch = make(clock, recorder)
    good, bad = asyncio.create_task(batch.add("b1")), asyncio.create_task(batch.add("bad"))
    await clock.run_for(0.1)
    assert recorder.calls == [["b1", "bad"]]
    assert await good == "B1"
    with pytest.raises(ValueError, match="bad"):
        await bad


async def test_a_merged_call_that_raises_fails_every_caller(clock: karpy_clock.ManualClock) -> None:
    async def broken(requests: list[str]) -> Sequence[str]:
        raise ConnectionError("down")

    batch: batcher.Batcher[str, str] = batcher.Batcher(
        "test", WINDOW, key=lambda r: "", execute=broken, now=clock.now, sleep=clock.sleep, observe=Recorder().observe
    )
    tasks = [asyncio.create_task(batch.add(r)) for r in ("x", "y")]
    await clock.run_for(0.1)
    for task in tasks:
        with pytest.raises(ConnectionError):
            await task


async def test_too_few_outcomes_fail_the_callers_left_without_one(clock: karpy_clock.ManualClock) -> None:
    async def short(requests: list[str]) -> Sequence[str]:
        return ["only one"]

    batch: batcher.Batcher[str, str] = batcher.Batcher(
        "test", WINDOW, key=lambda r: "", execute=short, now=clock.now, sleep=clock.sleep, observe=Recorder().observe
    )
    tasks = [asyncio.create_task(batch.add(r)) for r in ("x", "y")]
    await clock.run_for(0.1)
    assert await tasks[0] == "only one"
    with pytest.raises(batcher.MissingResult):
        await tasks[1]


async def test_a_caller_that_gave_up_is_left_out_and_an_abandoned_window_is_dropped(
    clock: karpy_clock.ManualClock, recorder: Recorder
) -> None:
    batch = make(clock, recorder)
    kept, dropped = asyncio.create_task(batch.add("a1")), asyncio.create_task(batch.add("a2"))
    await clock.settle()
    dropped.cancel()
    await clock.run_for(0.1)
    assert recorder.calls == [["a1"]]  # nothing is launched for a caller nobody waits for
    assert await kept == "A1"

    alone = asyncio.create_task(batch.add("b1"))
    await clock.settle()
    alone.cancel()
    await clock.settle()
    assert clock.sleepers == 0  # its window task is gone with it
    await clock.run_for(1.0)
    assert recorder.calls == [["a1"]]


async def test_close_cancels_open_windows_and_calls_in_flight(
    clock: karpy_clock.ManualClock, recorder: Recorder
) -> None:
    batch = make(clock, recorder)
    recorder.gate = asyncio.Event()
    in_flight = asyncio.create_task(batch.add("a1"))
    await clock.run_for(0.1)
    waiting = asyncio.create_task(batch.add("b1"))
    await clock.settle()
    await batch.close()
    for task in (in_flight, waiting):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert clock.sleepers == 0


async def test_zero_windows_merge_only_what_arrives_together(
    clock: karpy_clock.ManualClock, recorder: Recorder
) -> None:
    batch = make(clock, recorder, batcher.Window(idle=0.0, max_duration=0.0, max_items=100))
    together = [asyncio.create_task(batch.add(r)) for r in ("a1", "a2")]
    await clock.settle()
    later = asyncio.create_task(batch.add("a3"))
    await clock.settle()
    assert recorder.calls == [["a1", "a2"], ["a3"]]
    assert clock.sleepers == 0
    await asyncio.gather(*together, later)
