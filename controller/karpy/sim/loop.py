"""The stand-ins' main loop: one pass every interval on the injected clock, until cancelled."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

from karpy import clock as clock_module
from karpy.kube import client

log = logging.getLogger(__name__)


async def every(
    interval: float, sync: Callable[[], Awaitable[object]], *, clock: clock_module.Clock, name: str
) -> NoReturn:
    """Run `sync` every `interval` seconds. A pass the API server or moto fails (restarting, say) is logged and the
    next one tries again, as a real controller's would."""
    while True:
        try:
            await sync()
        except (client.KubeError, OSError) as error:
            log.warning("%s stand-in: pass failed: %s", name, error)
        await clock.sleep(interval)
