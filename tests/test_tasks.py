"""`karpy.tasks.cancel_and_wait`: children are cancelled and awaited, their failures handed back, and a cancellation
aimed at the caller while it waits is never swallowed. `collector_paused` and `without_collector`: the collector is
off for the work and back as it was found."""

from __future__ import annotations

import asyncio
import gc

import pytest

from karpy import tasks


async def test_children_are_cancelled_and_awaited() -> None:
    child = asyncio.create_task(asyncio.Event().wait())
    assert await tasks.cancel_and_wait([child]) == []
    assert child.cancelled()


async def test_failures_are_handed_back_and_finished_children_left_alone() -> None:
    async def fail() -> None:
        raise ValueError("broken")

    failed = asyncio.create_task(fail())
    done = asyncio.create_task(asyncio.sleep(0))
    await asyncio.wait([failed, done])
    (error,) = await tasks.cancel_and_wait([failed, done])
    assert isinstance(error, ValueError)
    assert not done.cancelled()


async def test_the_callers_own_cancellation_goes_through() -> None:
    """The caller is cancelled while a child takes its time to stop: the caller ends cancelled, it does not run on."""
    release = asyncio.Event()
    stopping = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopping.set()
            await release.wait()

    ran_on = False

    async def caller() -> None:
        nonlocal ran_on
        child = asyncio.create_task(slow_to_stop())
        await asyncio.sleep(0)
        await tasks.cancel_and_wait([child])
        ran_on = True

    task = asyncio.create_task(caller())
    await stopping.wait()
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not ran_on


def test_work_runs_without_the_collector_and_leaves_it_as_found() -> None:
    states: list[bool] = []
    paused = tasks.without_collector(lambda x: states.append(gc.isenabled()) or x * 2)
    assert paused(21) == 42
    assert states == [False]
    assert gc.isenabled()
    gc.disable()
    try:
        paused(1)
        assert not gc.isenabled()  # it was off before: the work does not turn it on
    finally:
        gc.enable()


def test_the_collector_comes_back_when_the_work_raises() -> None:
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        tasks.without_collector(fail)()
    assert gc.isenabled()
