"""`cancel_and_wait`: stop child tasks without swallowing the caller's own cancellation.

The tempting `task.cancel(); with suppress(CancelledError): await task` cannot tell the child's CancelledError from
one aimed at the caller: when the caller is cancelled while it waits there, the suppress eats that cancellation
and the caller runs on (a stopped controller's provisioning loop kept provisioning this way). `asyncio.wait` never
raises a child's outcome, so a CancelledError out of it is always the caller's and goes through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> list[BaseException]:
    """Cancel every unfinished task of `tasks` and wait until all have ended; the exceptions (other than
    cancellation) they ended with, in order, retrieved so that none is reported as never retrieved. Raises
    CancelledError only when the caller itself is cancelled meanwhile (the children are cancelled by then)."""
    waited = list(tasks)
    for task in waited:
        task.cancel()
    if waited:
        await asyncio.wait(waited)
    return [error for task in waited if not task.cancelled() and (error := task.exception()) is not None]
