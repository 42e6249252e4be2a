"""The keyed work queue: dedup, one worker per key, re-run when re-added mid-reconcile, requeue on the clock."""

from __future__ import annotations

import asyncio
import contextlib

from karpy import clock
from karpy.runtime import workqueue


async def test_dedup_serial_per_key_and_requeue_after() -> None:
    manual = clock.ManualClock()
    seen: list[str] = []
    running: set[str] = set()
    gate = asyncio.Event()
    overlaps = 0

    async def reconcile(key: str) -> float | None:
        nonlocal overlaps
        overlaps += key in running
        running.add(key)
        seen.append(key)
        if key == "slow":
            await gate.wait()
        running.discard(key)
        return 30.0 if key == "again" else None

    queue = workqueue.WorkQueue("test", reconcile, clock=manual, workers=4)
    task = asyncio.create_task(queue.run())
    try:
        queue.add("a")
        queue.add("a")  # queued already: no-op
        queue.add("slow")
        await manual.settle()
        queue.add("slow")  # while it runs: once more afterwards, never concurrently
        queue.add("slow")
        gate.set()
        queue.add("again")
        await manual.settle()
        assert sorted(seen) == ["a", "again", "slow", "slow"]
        assert overlaps == 0
        await manual.run_for(29)
        assert seen.count("again") == 1
        await manual.run_for(1)
        assert seen.count("again") == 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert manual.sleepers == 0  # the requeue timer went with the queue


async def test_a_failing_reconcile_is_retried_after_backoff() -> None:
    manual = clock.ManualClock()
    calls = 0

    async def reconcile(key: str) -> float | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return None

    queue = workqueue.WorkQueue("test", reconcile, clock=manual, workers=1)
    task = asyncio.create_task(queue.run())
    try:
        queue.add("x")
        await manual.settle()
        assert calls == 1
        await manual.run_for(workqueue.ERROR_BACKOFF)
        assert calls == 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_key_that_keeps_failing_backs_off_alone_and_is_reported() -> None:
    manual = clock.ManualClock()
    calls: dict[str, list[float]] = {"bad": [], "good": []}
    reported: list[tuple[str, str]] = []

    async def reconcile(key: str) -> float | None:
        calls[key].append(manual.now())
        if key == "bad":
            raise KeyError("a field no one foresaw")
        return 1.0  # the good key keeps being reconciled every second

    queue = workqueue.WorkQueue(
        "test", reconcile, clock=manual, workers=1, on_error=lambda key, exc: reported.append((key, repr(exc)))
    )
    task = asyncio.create_task(queue.run())
    try:
        queue.add("bad")
        queue.add("good")
        await manual.run_for(80)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    start = calls["bad"][0]
    assert [t - start for t in calls["bad"]] == [0, 5, 15, 35, 75], "5 s doubling, per key"
    assert len(calls["good"]) >= 80, "the other key was served all along"
    assert reported[0] == ("bad", "KeyError('a field no one foresaw')")
    assert len(reported) == len(calls["bad"])


async def test_the_backoff_resets_once_the_key_reconciles() -> None:
    manual = clock.ManualClock()
    outcomes = [RuntimeError("1"), RuntimeError("2"), None, RuntimeError("3")]
    times: list[float] = []

    async def reconcile(key: str) -> float | None:
        times.append(manual.now())
        outcome = outcomes.pop(0) if outcomes else None
        if outcome is not None:
            raise outcome
        return 1.0

    queue = workqueue.WorkQueue("test", reconcile, clock=manual, workers=1, on_error=lambda key, exc: None)
    task = asyncio.create_task(queue.run())
    try:
        queue.add("x")
        await manual.run_for(30)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [t - times[0] for t in times[:5]] == [0, 5, 15, 16, 21]
