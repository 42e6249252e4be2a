"""The stand-ins' main loop (one pass every interval on the injected clock, until cancelled) and their bounded
concurrency for the writes of one pass (`gather_limited`, and kube-controller-manager's `slow_start_batch`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import NoReturn, TypeVar

from karpy import clock as karpy_clock
from karpy.kube import client

log = logging.getLogger(__name__)
T = TypeVar("T")


async def every(
    interval: float, sync: Callable[[], Awaitable[object]], *, clock: karpy_clock.Clock, name: str
) -> NoReturn:
    """Run `sync` every `interval` seconds. A pass the API server or moto fails (restarting, say) is logged and the
    next one tries again, as a real controller's would."""
    while True:
        try:
            await sync()
        except (client.KubeError, OSError) as error:
            log.warning("%s stand-in: pass failed: %s", name, error)
        await clock.sleep(interval)


async def gather_limited(calls: Iterable[Callable[[], Awaitable[T]]], *, limit: int) -> list[T]:
    """Run every call with at most `limit` in flight (requests of independent components — kubelets of several
    nodes, kube-scheduler's binding goroutines — overlap instead of queueing one round trip behind the other);
    results in the order of `calls`. The first failure cancels the calls still running and is raised as is."""
    gate = asyncio.Semaphore(max(1, limit))

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(call)) for call in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


async def slow_start_batch(
    count: int, call: Callable[[], Awaitable[T]], *, initial: int = 1
) -> tuple[list[T], Exception | None]:
    """Make `count` calls in batches of `initial`, then twice as many each time, every batch's calls side by side
    (kube-controller-manager's slowStartBatch, pkg/controller/replicaset/replica_set.go): a controller creating
    hundreds of pods sends them in bulk, yet one whose every create fails stops after the first. The results of the
    calls that succeeded, and the first error of the batch that failed (no later batch is started), or None."""
    done: list[T] = []
    remaining = count
    size = min(remaining, max(1, initial))
    while size > 0:
        results = await asyncio.gather(*(call() for _ in range(size)), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation and the like are not a call's failure
        done.extend(r for r in results if not isinstance(r, BaseException))
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is not None:
            return done, failed
        remaining -= size
        size = min(2 * size, remaining)
    return done, None
