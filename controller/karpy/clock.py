"""Time as an injected dependency: `Clock` (now + sleep), the wall clock, and a manual clock for virtual time.

Domain code never reads the wall clock; it takes a `Clock`. Tests drive a `ManualClock`: sleepers wake only when
the test advances time, in deadline order, so a 15-minute timeout takes microseconds. No aiohttp, no I/O here.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

SETTLE_ROUNDS = 20
"""Event-loop iterations `ManualClock.settle` yields: enough for chains of woken tasks to reach their next await."""


Now = Callable[[], float]
"""A clock's reading alone (`Clock.now`, epoch seconds): what code takes that stamps and compares times but never
sleeps (TTL caches, the AWS provider's parts). `Clock` is the only clock."""


class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class Activity(Protocol):
    """Work in flight that a self-driving virtual clock (`karpy.autojump`) must wait for before moving time on.

    I/O layers report through it: `busy()` spans a request or a worker-thread call, `touch()` marks that something
    arrived (a watch event) and may still be processed."""

    def busy(self) -> contextlib.AbstractContextManager[None]: ...

    def waiting(self) -> contextlib.AbstractContextManager[None]:
        """Spans a wait for time to pass inside tracked work (an emulated slow answer in a worker thread): not
        work in flight while it lasts, or time could never move on to end it."""
        ...

    def touch(self) -> None: ...


class _Untracked:
    """The `Activity` of every clock but a self-driving one: nothing to report to."""

    def busy(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def waiting(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def touch(self) -> None:
        return None


UNTRACKED: Activity = _Untracked()


class SystemClock:
    """The wall clock (`time.time`) and the event loop's timers (`asyncio.sleep`)."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


@dataclass(order=True, slots=True)
class _Sleeper:
    deadline: float
    order: int
    future: asyncio.Future[None] = field(compare=False)


class ManualClock:
    """Virtual time that moves only when told to; `sleep` parks the caller until `advance` passes its deadline."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._sleepers: list[_Sleeper] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)  # still a scheduling point, like asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, _Sleeper(self._now + seconds, next(self._order), future))
        await future  # a cancelled sleeper leaves a done future behind; `_due` skips it

    @property
    def sleepers(self) -> int:
        """How many tasks are parked in `sleep` right now."""
        return sum(1 for s in self._sleepers if not s.future.done())

    def next_deadline(self) -> float | None:
        """When the earliest parked sleeper wakes, or None when nobody sleeps."""
        self._drop_done()
        return self._sleepers[0].deadline if self._sleepers else None

    def advance(self, seconds: float) -> int:
        """Move time forward and wake, in deadline order, every sleeper due by then; returns how many woke.

        The woken tasks run at the loop's next iterations (`await clock.settle()`); a sleep they start then is
        measured from the new time. Use `run_for` when woken tasks sleep again within the same window.
        """
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance by {seconds} s)")
        target = self._now + seconds
        woken = 0
        for sleeper in self._due(target):
            self._now = max(self._now, sleeper.deadline)
            sleeper.future.set_result(None)
            woken += 1
        self._now = target
        return woken

    def set(self, when: float) -> int:
        """Jump to the absolute time `when` (not earlier than now), waking sleepers as `advance` does."""
        return self.advance(when - self._now)

    async def settle(self, rounds: int = SETTLE_ROUNDS) -> None:
        """Let woken tasks run until they park again (a bounded number of loop iterations, no wall-clock wait)."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def run_for(self, seconds: float, *, rounds: int = SETTLE_ROUNDS) -> None:
        """Advance to now+seconds one deadline at a time, settling after each: chains of sleeps inside the window
        wake at their own deadlines, with `now()` equal to each deadline when the sleeper resumes."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (run for {seconds} s)")
        target = self._now + seconds
        await self.settle(rounds)
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            self.advance(deadline - self._now)
            await self.settle(rounds)
        self.advance(target - self._now)
        await self.settle(rounds)

    async def run_until(self, predicate: Callable[[], bool], *, limit: float, rounds: int = SETTLE_ROUNDS) -> float:
        """Advance deadline by deadline until `predicate()` holds; returns the virtual seconds it took.

        Raises TimeoutError when it still does not hold after `limit` virtual seconds or when nothing sleeps
        any more (time alone cannot make it true then).
        """
        start = self._now
        await self.settle(rounds)
        while not predicate():
            deadline = self.next_deadline()
            if deadline is None or deadline - start > limit:
                raise TimeoutError(f"condition still false after {self._now - start:g} virtual s")
            self.advance(deadline - self._now)
            await self.settle(rounds)
        return self._now - start

    def _drop_done(self) -> None:
        while self._sleepers and self._sleepers[0].future.done():
            heapq.heappop(self._sleepers)

    def _due(self, target: float) -> list[_Sleeper]:
        due: list[_Sleeper] = []
        while self._sleepers and self._sleepers[0].deadline <= target:
            sleeper = heapq.heappop(self._sleepers)
            if not sleeper.future.done():
                due.append(sleeper)
        return due
