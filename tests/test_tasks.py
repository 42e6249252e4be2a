"""`karpy.tasks.cancel_and_wait`: children are cancelled and awaited, their failures handed back, and a cancellation
aimed at the caller while it waits is never swallowed. `collector_paused` and `without_collector`: the collector is
off for the work and back as it was found. `collector_tuned`: the controller's thresholds for the block, and far
fewer collections for the same allocations."""

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


def test_the_controllers_thresholds_hold_for_the_block_and_are_restored() -> None:
    was = gc.get_threshold()
    with tasks.collector_tuned():
        assert gc.get_threshold() == tasks.COLLECTOR_THRESHOLDS
    assert gc.get_threshold() == was


def _collections_while_allocating(live: int) -> int:
    """Collections (any generation) run while `live` container objects are allocated and kept."""
    ran = 0

    def count(phase: str, _info: dict[str, int]) -> None:
        nonlocal ran
        ran += phase == "start"

    gc.callbacks.append(count)
    try:
        kept = [{"n": i} for i in range(live)]
    finally:
        gc.callbacks.remove(count)
    assert len(kept) == live
    return ran


def test_a_burst_of_allocations_runs_a_handful_of_collections_not_hundreds() -> None:
    """What `karpy run` saves: 100,000 surviving allocations (a scale-out's watch events and parsed objects) run
    ~143 young collections at CPython's threshold of 700 and about 10 at the controller's."""
    assert gc.isenabled()
    with tasks.collector_tuned():
        tuned = _collections_while_allocating(100_000)
    assert tuned <= 100_000 // tasks.COLLECTOR_THRESHOLDS[0] + 2
    with tasks.collector_tuned((700, 10, 10)):
        assert _collections_while_allocating(100_000) > 10 * tuned  # the count tells the thresholds apart
