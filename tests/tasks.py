"""Helpers for tests that run a controller's forever-loop: started for the length of an `async with` block and always
cancelled and awaited at its end, so no test leaves a task behind."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running(loop: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[asyncio.Task[None]]:
    """`async with running(ctrl.run) as task:` — the loop runs while the block does."""
    task = asyncio.create_task(loop())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
