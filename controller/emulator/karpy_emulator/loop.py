"""The stand-ins' main loop and their bounded concurrency for the writes of one pass (`gather_limited`, and
kube-controller-manager's `slow_start_batch`).

The loop ticks every interval on the injected clock, until cancelled. Given a `Watch`, a tick runs a pass only when
the store's change feed says one of the resources the stand-in reads was written since its last pass, or the
stand-in has work waiting on time (a boot delay, a message refresh): an idle cluster of 50,000 pods costs a
revision read per tick, not a LIST of every pod, as a controller fed by informers wakes on events (client-go
tools/cache/shared_informer.go) rather than on a timer. Passes still fall on the ticks, so a run under the autojump
clock is as deterministic as before; a pass that fails is retried on the next tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol, TypeVar, runtime_checkable

from karpy import clock as karpy_clock
from karpy.kube import client, resources

log = logging.getLogger(__name__)
T = TypeVar("T")


@runtime_checkable
class ChangeFeed(Protocol):
    """The store's change feed (`reads.StoreReader` is one): the revision of the latest write to any object of
    the given resources; equal answers mean none of them changed in between."""

    async def changed_at(self, watched: Sequence[resources.Resource]) -> int: ...


async def never(now: float) -> bool:
    """Nothing waits on time: only writes wake the stand-in."""
    return False


@dataclass(frozen=True, slots=True)
class Watch:
    """What wakes a stand-in: writes to `resources` in `feed`, or `due(now)` (work waiting on time, decided by the
    stand-in's last pass)."""

    feed: ChangeFeed
    resources: tuple[resources.Resource, ...]
    due: Callable[[float], Awaitable[bool]] = never


def watch(
    reader: object, watched: Sequence[resources.Resource], *, due: Callable[[float], Awaitable[bool]] = never
) -> Watch | None:
    """A `Watch` over `reader` when it is a change feed; None (a pass every tick) for a plain client."""
    return Watch(reader, tuple(watched), due) if isinstance(reader, ChangeFeed) else None


async def every(
    interval: float,
    sync: Callable[[], Awaitable[object]],
    *,
    clock: karpy_clock.Clock,
    name: str,
    watch: Watch | None = None,
) -> NoReturn:
    """Tick every `interval` seconds; run `sync` on each tick, or, given `watch`, only on the ticks where something
    it watches changed or is due (see the module docstring). A pass the API server or moto fails (restarting, say)
    is logged and the next tick tries again, as a real controller's would."""
    seen: int | None = None
    while True:
        try:
            if watch is None:
                await sync()
            else:
                # Read before the pass: a write landing during it (its own included) wakes the next tick.
                revision = await watch.feed.changed_at(watch.resources)
                if revision != seen or await watch.due(clock.now()):
                    await sync()
                    seen = revision
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
