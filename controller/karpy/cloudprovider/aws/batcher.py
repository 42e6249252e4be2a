"""Merge concurrent API requests into one call (aws: pkg/batcher/batcher.go), on the injected clock.

Each request goes to the bucket of its key (requests that differ only in what the merged call adds up or lists
share a key). A bucket's window opens with its first request and closes `idle` seconds after its latest one or
`max_duration` after its first, whichever is sooner, or as soon as it holds `max_items`. Then one `execute` call
gets the bucket's requests and returns one outcome per request, in order: a result, or the exception that request's
caller raises. A caller that gave up (cancelled) before the window closed is left out of the merged call, so a
launch nobody waits for any more is not made; once every caller of a bucket gave up its window is dropped.

One task per open bucket waits for the window and runs the call; it ends when the call did, and the callers await
their own futures, so nothing outlives the requests that made it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from typing import Any, Generic, TypeVar

from karpy import tasks

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")

Execute = Callable[[list[T]], Awaitable[Sequence[U | BaseException]]]
"""The merged call: one outcome per request, in the requests' order."""
Observe = Callable[[str, int, float], None]
"""(batcher name, requests merged, seconds the window was open), once per merged call."""


class MissingResult(RuntimeError):
    """The merged call returned fewer outcomes than it was given requests (upstream: "error making call")."""


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    idle: float
    """Seconds without a new request after which the window closes."""
    max_duration: float
    """Seconds after its first request at which the window closes however busy it is."""
    max_items: int
    """Requests at which the window closes at once (the API's limit on one merged call)."""


@dataclasses.dataclass(slots=True)
class _Bucket(Generic[T, U]):
    opened: float
    last: float
    requests: list[T] = dataclasses.field(default_factory=list)
    futures: list[asyncio.Future[U]] = dataclasses.field(default_factory=list)
    task: asyncio.Task[None] | None = None


class Batcher(Generic[T, U]):
    def __init__(
        self,
        name: str,
        window: Window,
        *,
        key: Callable[[T], Hashable],
        execute: Execute[T, U],
        now: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        observe: Observe,
    ) -> None:
        self.name = name
        self._window = window
        self._key = key
        self._execute = execute
        self._now = now
        self._sleep = sleep
        self._observe = observe
        self._open: dict[Hashable, _Bucket[T, U]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def add(self, request: T) -> U:
        """The outcome of `request` once its bucket's merged call returned (its exception is raised here)."""
        key = self._key(request)
        now = self._now()
        bucket = self._open.get(key)
        if bucket is None:
            bucket = self._open[key] = _Bucket(opened=now, last=now)
            bucket.task = self._start(self._wait_then_run(key, bucket))
        future: asyncio.Future[U] = asyncio.get_running_loop().create_future()
        bucket.requests.append(request)
        bucket.futures.append(future)
        bucket.last = now
        if len(bucket.requests) >= self._window.max_items:
            self._close_now(key, bucket)
        try:
            return await future
        except asyncio.CancelledError:
            self._drop_if_abandoned(key, bucket)
            raise

    def _start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work, name=f"batcher {self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _wait_then_run(self, key: Hashable, bucket: _Bucket[T, U]) -> None:
        window = self._window
        while (wait := min(bucket.last + window.idle, bucket.opened + window.max_duration) - self._now()) > 0:
            await self._sleep(wait)
        if self._open.get(key) is bucket:
            del self._open[key]
        await self._run(bucket)

    def _close_now(self, key: Hashable, bucket: _Bucket[T, U]) -> None:
        """A full bucket is not waited on: its window task (asleep) makes way for one that runs the call now."""
        del self._open[key]
        if bucket.task is not None:
            bucket.task.cancel()
        bucket.task = self._start(self._run(bucket))

    def _drop_if_abandoned(self, key: Hashable, bucket: _Bucket[T, U]) -> None:
        if self._open.get(key) is bucket and all(f.done() for f in bucket.futures):
            del self._open[key]
            if bucket.task is not None:
                bucket.task.cancel()

    async def _run(self, bucket: _Bucket[T, U]) -> None:
        live = [(r, f) for r, f in zip(bucket.requests, bucket.futures, strict=True) if not f.done()]
        if not live:
            return
        self._observe(self.name, len(live), self._now() - bucket.opened)
        try:
            outcomes: Sequence[U | BaseException] = await self._execute([r for r, _ in live])
        except asyncio.CancelledError:
            for _, future in live:
                future.cancel()
            raise
        except Exception as exc:  # the merged call failed as a whole: every caller gets its error
            outcomes = [exc] * len(live)
        if len(outcomes) < len(live):
            log.error("%s batch returned %d outcomes for %d requests", self.name, len(outcomes), len(live))
        for index, (_, future) in enumerate(live):
            if future.done():
                continue
            outcome = outcomes[index] if index < len(outcomes) else MissingResult(f"{self.name}: no result")
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    async def close(self) -> None:
        """Cancel every open window and merged call (their callers get CancelledError) and wait for them."""
        for bucket in self._open.values():
            for future in bucket.futures:
                future.cancel()
        self._open.clear()
        await tasks.cancel_and_wait(list(self._tasks))
