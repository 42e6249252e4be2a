"""Waiting, in tests, for work that runs in real time: a loopback round trip to the emulated API server, a solve in a
worker thread, Kopf in its own thread. `until` polls a check until it holds and has no time bound of its own: the
bound is the test's timeout (pytest-timeout, see tests/conftest.py). So a loaded machine can make a test slower but
never make it fail; a hang fails it, with the stack of the wait. Work on an injected clock is not waited for this way:
such a test steps its `ManualClock` (or runs on the autojump clock) instead."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

EVERY = 0.01
"""Real seconds between two checks: short, since each check is cheap and the work usually takes milliseconds."""


async def until(check: Callable[[], T | Awaitable[T]], *, every: float = EVERY) -> T:
    """Call `check` (sync or async) until it returns something truthy, and return that."""
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        await asyncio.sleep(every)


def until_sync(check: Callable[[], T], *, every: float = 0.05) -> T:
    """`until` for a test without an event loop (the work runs in another thread)."""
    while not (result := check()):
        time.sleep(every)
    return result
