"""`forever`: a controller loop that survives a failed pass. An API server or cloud outage, or a refused write,
must end one pass, not the controller: the error is logged with its traceback and the step runs again after a
delay on the injected clock, doubling up to a cap with each consecutive failure and reset by the next success
(`max_delay == delay` gives a fixed delay). Cancellation always goes through."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from karpy import clock as karpy_clock


async def forever(
    step: Callable[[], Awaitable[object]],
    *,
    clock: karpy_clock.Clock,
    log: logging.Logger,
    what: str,
    delay: float,
    max_delay: float | None = None,
) -> None:
    """Run `step` again and again until cancelled; a failure logs "`what` failed" and waits before the next."""
    cap = delay if max_delay is None else max_delay
    wait = delay
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed", what, extra={"retry-after": wait})
            await clock.sleep(wait)
            wait = min(cap, wait * 2)
        else:
            wait = delay
