"""`AutojumpClock`: virtual time that moves on by itself whenever the whole emulation is idle.

A `ManualClock` with a driver: while `async with clock.driving():` runs, a task watches the tracked work (HTTP
requests of the clients given `clock.activity`, every call through the event loop's default executor: boto3 to
moto, the provisioner's solve, ...) and, once nothing is in flight and nothing has happened for `idle` seconds of
real time, jumps to the earliest sleeper's deadline and wakes it (trio's `MockClock(autojump_threshold=...)`).

So the controller and the emulation share one clock on which waiting costs no real time and work costs no virtual
time: a scenario whose timers add up to minutes (consolidateAfter, the 15 s validation, drain and termination polls)
runs as fast as its work. Time only ever jumps while nothing is in flight, so no timeout can fire under a request
or a boto3 call that is merely slow on a loaded machine.

Blocking calls that wait on purpose (an SQS long poll) would hold time still for their whole wait: run the
interruption poller off, or with a zero-second poll, on this clock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from karpy import clock as karpy_clock
from karpy import tasks

IDLE_SECONDS = 0.02
"""Real seconds with nothing in flight and nothing happening before time jumps: long enough for a watch event the
API server sent to cross the loopback socket and be handled (its handler's own requests then count as in flight).
Until the server has sent it, the event is in flight itself (`apiserver.deliveries`): no idle period is long enough
for a server thread that waits for a core on a loaded machine."""

T = TypeVar("T")


class Tracker:
    """The `Activity` of an `AutojumpClock`: how much work is in flight and a stamp that moves at every event.

    Thread-safe: executor threads report their calls' ends from their own thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stamp = 0

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.exit()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        self.exit()
        try:
            yield
        finally:
            self.enter()

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._stamp += 1

    def exit(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._stamp += 1

    def touch(self) -> None:
        with self._lock:
            self._stamp += 1

    def snapshot(self) -> tuple[int, int]:
        """(calls in flight, stamp)."""
        with self._lock:
            return self._in_flight, self._stamp


class TrackedExecutor(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose calls count as work in flight (installed as the loop's default executor, so
    `asyncio.to_thread` and `run_in_executor(None, ...)` are tracked without their callers knowing)."""

    def __init__(self, tracker: Tracker, *, max_workers: int | None = None) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="autojump")
        self._tracker = tracker

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        self._tracker.enter()
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._tracker.exit()
            raise
        future.add_done_callback(lambda _: self._tracker.exit())
        return future


class AutojumpClock(karpy_clock.ManualClock):
    """Virtual time for a whole emulated system; see the module docstring. A test may still `advance` it by hand."""

    def __init__(self, start: float = 1_700_000_000.0, *, idle: float = IDLE_SECONDS) -> None:
        super().__init__(start)
        if idle <= 0:
            raise ValueError(f"idle must be positive, got {idle}")
        self.activity = Tracker()
        self._idle = idle
        self.jumps = 0

    @contextlib.asynccontextmanager
    async def driving(self) -> AsyncIterator[None]:
        """Drive time while the block runs. Installs a `TrackedExecutor` as the running loop's default executor
        (left in place afterwards; the loop shuts it down with itself like any default executor)."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(TrackedExecutor(self.activity))
        driver = asyncio.create_task(self._drive(), name="autojump-clock")
        try:
            yield
        finally:
            await tasks.cancel_and_wait([driver])

    async def _drive(self) -> None:
        while True:
            _, before = self.activity.snapshot()
            await asyncio.sleep(self._idle)  # real time: the quiet period that makes a jump safe
            in_flight, after = self.activity.snapshot()
            if in_flight or after != before:
                continue
            deadline = self.next_deadline()
            if deadline is not None:
                self.set(max(deadline, self.now()))
                self.jumps += 1


def activity_of(clock: karpy_clock.Clock) -> karpy_clock.Activity:
    """Where I/O on `clock` reports its work: the autojump clock's tracker, or nowhere."""
    return clock.activity if isinstance(clock, AutojumpClock) else karpy_clock.UNTRACKED
