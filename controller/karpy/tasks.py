"""`cancel_and_wait`: stop child tasks without swallowing the caller's own cancellation; `collector_paused` and
`without_collector`: the cyclic garbage collector paused for a thread's work, at the thread's entry point;
`collector_tuned`: the collector's thresholds for a long-running controller process.

The tempting `task.cancel(); with suppress(CancelledError): await task` cannot tell the child's CancelledError from
one aimed at the caller: when the caller is cancelled while it waits there, the suppress eats that cancellation
and the caller runs on (a stopped controller's provisioning loop kept provisioning this way). `asyncio.wait` never
raises a child's outcome, so a CancelledError out of it is always the caller's and goes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

COLLECTOR_THRESHOLDS: Final = (10_000, 10, 10)
"""`gc.set_threshold` for `karpy run`: a young-generation collection every 10,000 net container allocations instead
of CPython's 700, so a full collection every million instead of every 70,000. The controller keeps a few hundred
thousand long-lived objects (modules, the instance-type catalog, the informers' cache) that every full collection
scans again for nothing, while a scale-out allocates millions of short-lived ones (watch events, parsed objects,
API responses): with CPython's thresholds basic's scale-out (bench/performance.py) ran 4 full collections and
spent 0.94 s of CPU in the collector (gc.callbacks, thread CPU time), with these none and 0.29 s. Cyclic garbage
waits at most 10,000 allocations longer to be freed; what is not cyclic is freed by reference count as before."""


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


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause `gc` for the block and resume it after, unless it was off already (so overlapping blocks in several
    threads leave it on as soon as one ends: at worst a collection comes sooner).

    For the entry point of work that allocates hundreds of thousands of small objects which live until it returns
    and are freed by reference count (a scheduling solve, an explanation's cluster model): each full collection
    meanwhile would scan them all again for nothing, about a seventh of a 20,000-pod solve (bench/scheduling.py).
    The collector is process-wide state, so the pure layers never touch it: the thread that runs them decides."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def collector_tuned(thresholds: tuple[int, int, int] = COLLECTOR_THRESHOLDS) -> Iterator[None]:
    """The collector's thresholds set to `thresholds` for the block (the process's run) and restored after it."""
    was = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*was)


def without_collector(work: Callable[P, R]) -> Callable[P, R]:
    """`work`, run with the collector paused: what a worker thread or the composition root hands on."""

    @functools.wraps(work)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return work(*args, **kwargs)

    return paused
