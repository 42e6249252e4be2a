"""A keyed work queue, as controller-runtime's: a key is reconciled by one worker at a time, re-adding a key that is
queued is a no-op, a key re-added while it is being reconciled runs once more afterwards, and `requeue_after` comes
back through `add(key, after=...)` on the injected clock. The state cache's listener (`routing`) only `add`s; the
leader's workers drain it. No decisions here. Hand-written, not Kopf's handlers: Kopf's retries, backoff and timers
re-trigger by writing annotations or its finalizer on the object, which upstream never does.

A reconcile that raises affects its own key only: it is retried after a per-key backoff (5 s doubling to 5 min, as
controller-runtime's rate limiter backs off a failing item) and handed to `on_error` (the operator reports the
object: an Event, a log line with the traceback, a counter), while every other key goes on being reconciled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from karpy import clock as karpy_clock
from karpy import tasks

log = logging.getLogger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]
"""Reconcile one key; return seconds after which to run it again, or None."""
ErrorHook = Callable[[str, Exception], None]
ERROR_BACKOFF = 5.0
ERROR_BACKOFF_MAX = 300.0
SUCCESS, ERROR, REQUEUE_AFTER = "success", "error", "requeue_after"
"""controller-runtime's `result` label values of a reconcile (controller_runtime_reconcile_total)."""


class Metrics:
    """What a queue counts, by name: client-go's workqueue series and controller-runtime's reconcile series. The
    operator's subclass binds each to its series (`karpy.runtime.metrics.queues`); this one counts nothing."""

    def added(self) -> None:
        """A key queued that was not queued already (workqueue_adds_total)."""

    def waited(self, seconds: float) -> None:
        """Seconds a key spent queued before a worker took it (workqueue_queue_duration_seconds)."""

    def worked(self, seconds: float) -> None:
        """Seconds one reconcile took (workqueue_work_duration_seconds, controller_runtime_reconcile_time_seconds)."""

    def reconciled(self, result: str) -> None:
        """A reconcile's result: SUCCESS, ERROR or REQUEUE_AFTER (controller_runtime_reconcile_total)."""

    def retried(self) -> None:
        """A failed key queued again after its backoff (workqueue_retries_total)."""


class WorkQueue:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        clock: karpy_clock.Clock,
        workers: int = 4,
        on_error: ErrorHook | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.name = name
        self._metrics = metrics or Metrics()
        self._reconcile = reconcile
        self._on_error = on_error
        self._failures: dict[str, int] = {}
        self._clock = clock
        self._workers = workers
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: dict[str, float] = {}
        """Key -> when its reconcile started."""
        self._queued_at: dict[str, float] = {}
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.Task[None]] = {}
        self.reconciled = 0
        """Reconciles completed (for tests and debugging)."""

    def add(self, key: str, *, after: float = 0.0) -> None:
        if after > 0:
            if key not in self._timers:
                self._timers[key] = asyncio.get_running_loop().create_task(self._later(key, after))
            return
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queued_at[key] = self._clock.now()
            self._queue.put_nowait(key)
            self._metrics.added()

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def workers(self) -> int:
        return self._workers

    def running_since(self) -> Mapping[str, float]:
        """Key -> start time of every reconcile running now (for the unfinished-work gauges)."""
        return dict(self._active)

    async def _later(self, key: str, after: float) -> None:
        try:
            await self._clock.sleep(after)
        finally:
            self._timers.pop(key, None)
        self.add(key)

    async def run(self) -> None:
        """Drain with `workers` workers until cancelled; pending timers are cancelled with it."""
        try:
            async with asyncio.TaskGroup() as group:
                for i in range(self._workers):
                    group.create_task(self._work(), name=f"{self.name} worker {i}")
        finally:
            await tasks.cancel_and_wait(list(self._timers.values()))
            self._timers.clear()

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            start = self._clock.now()
            self._metrics.waited(start - self._queued_at.pop(key, start))
            self._active[key] = start
            again: float | None
            try:
                again = await self._reconcile(key)
                self._failures.pop(key, None)
                self._metrics.reconciled(SUCCESS if again is None else REQUEUE_AFTER)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one broken object must not stop the others: report and retry later
                again = self._failed(key, exc)
                self._metrics.reconciled(ERROR)
                self._metrics.retried()
            finally:
                self._active.pop(key, None)
                self._metrics.worked(self._clock.now() - start)
            self.reconciled += 1
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif again is not None:
                self.add(key, after=again)

    def _failed(self, key: str, exc: Exception) -> float:
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        again: float = min(ERROR_BACKOFF_MAX, ERROR_BACKOFF * 2.0 ** min(failures - 1, 16))
        if self._on_error is None:
            log.exception("reconciling %s %s failed; retrying in %gs", self.name, key, again)
            return again
        log.warning("reconciling %s %s failed (%s); retrying in %gs", self.name, key, exc, again)
        try:
            self._on_error(key, exc)
        except Exception:
            log.exception("reporting the failure of %s %s failed", self.name, key)
        return again

    def clear(self) -> None:
        """Forget everything queued (leadership lost: the next leader re-lists anyway)."""
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queued.clear()
        self._queued_at.clear()
        self._dirty.clear()
