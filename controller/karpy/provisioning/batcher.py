"""The provisioning batch window (core: pkg/controllers/provisioning/batcher.go).

Pods that become provisionable `trigger` the batcher with their UID. `wait` returns False when no trigger arrives
within `first_wait` (the loop then goes round again, refreshing its view), else it keeps the window open until no
new UID has arrived for `idle` seconds or `max_duration` seconds have passed since the window opened, and returns
True. A UID already seen in the current window does not re-arm the idle timer (a pod re-queued every 10 s must not
hold a window open forever). Time comes from the injected clock only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from karpy import tasks
from karpy.clock import Clock

BATCH_IDLE_DURATION = 1.0
"""Seconds without a new trigger that close a window (upstream BATCH_IDLE_DURATION default)."""
BATCH_MAX_DURATION = 10.0
"""Seconds after which a window closes however busy it is (upstream BATCH_MAX_DURATION default)."""
FIRST_TRIGGER_WAIT = 1.0
"""Seconds `wait` waits for a first trigger before giving up (upstream hard-codes 1 s)."""


@dataclass(frozen=True, slots=True)
class WindowSettings:
    idle: float = BATCH_IDLE_DURATION
    max_duration: float = BATCH_MAX_DURATION
    first_wait: float = FIRST_TRIGGER_WAIT


def closes_at(opened_at: float, last_trigger_at: float, *, settings: WindowSettings) -> float:
    """When a window opened at `opened_at` whose latest new trigger came at `last_trigger_at` closes."""
    return min(last_trigger_at + settings.idle, opened_at + settings.max_duration)


class Batcher:
    """One batch window at a time; `trigger` may be called from any coroutine on the same loop."""

    def __init__(self, clock: Clock, *, settings: WindowSettings | None = None) -> None:
        self._clock = clock
        self._settings = settings or WindowSettings()
        self._seen: set[str] = set()
        self._last_trigger_at: float | None = None
        self._triggered = asyncio.Event()

    def trigger(self, uid: str) -> None:
        """Note that `uid` (a pod, or a node whose pods need a home) wants provisioning; duplicates are ignored."""
        if uid in self._seen:
            return
        self._seen.add(uid)
        self._last_trigger_at = self._clock.now()
        self._triggered.set()

    async def wait(self) -> bool:
        """Wait for a window to open and close; False when nothing triggered within `first_wait` seconds."""
        try:
            if not await self._next_trigger(self._settings.first_wait):
                return False
            opened_at = self._clock.now()
            while True:
                last = max(self._last_trigger_at or opened_at, opened_at)
                remaining = closes_at(opened_at, last, settings=self._settings) - self._clock.now()
                if remaining <= 0:
                    return True
                await self._next_trigger(remaining)  # a new trigger moves the idle deadline; recompute either way
        finally:
            self._seen.clear()
            self._last_trigger_at = None
            self._triggered.clear()

    async def _next_trigger(self, seconds: float) -> bool:
        """True as soon as a new trigger is (or already was) signalled, False after `seconds` clock seconds."""
        if self._triggered.is_set():
            self._triggered.clear()
            return True
        if seconds <= 0:
            return False
        waiter = asyncio.ensure_future(self._triggered.wait())
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait((waiter, sleeper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await tasks.cancel_and_wait(task for task in (waiter, sleeper) if not task.done())
        if waiter.done() and not waiter.cancelled():
            self._triggered.clear()
            return True
        return False
