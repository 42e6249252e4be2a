"""moto's server answering one request at a time, as EC2 answers each request atomically: part of the emulation,
never of the runtime.

moto's threaded server serves each request on a thread of its own, but its backends are plain dicts and lists
shared by every thread, with no locks (moto's documentation says it does not support multithreaded access:
getmoto/moto#7166). Under load one request reads what another is changing: a DescribeInstances whose tag filter
walks the region's tags while a CreateFleet adds some answered HTTP 500 ("dictionary changed size during
iteration"), which EC2 never does. The patch holds `LOCK` around moto's dispatch (`DomainDispatcherApplication`),
so the backends see one request at a time.

The one request that waits inside moto is SQS's long poll (`Queue.wait_for_messages`, woken when a message is sent):
it lets `LOCK` go while it waits, as a condition variable does, so that a SendMessage can come in and wake it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any, Final

_PATCHED: Final = "_karpy_serialized_patched"
LOCK: Final = threading.Lock()
"""Held while moto's server dispatches a request (see the module docstring). moto's backends are process-wide, so
the lock that guards them is too."""
_HOLDING: Final = threading.local()
"""`held` is True on the request thread that holds `LOCK` (its long poll gives it up while waiting)."""


def install() -> None:
    """Make moto's server dispatch one request at a time, its SQS long poll waiting outside. Idempotent."""
    from moto.moto_server import werkzeug_app  # lazily: the controller image does not ship moto
    from moto.sqs import models

    dispatcher: Any = werkzeug_app.DomainDispatcherApplication
    if getattr(dispatcher, _PATCHED, False):
        return
    dispatch = dispatcher.__call__
    queue: Any = models.Queue
    wait_for_messages = queue.wait_for_messages

    @functools.wraps(dispatch)
    def serialized(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        with _holding():
            return dispatch(self, environ, start_response)

    @functools.wraps(wait_for_messages)
    def waiting_unlocked(self: Any, timeout: int) -> None:
        if not getattr(_HOLDING, "held", False):
            wait_for_messages(self, timeout)
            return
        _HOLDING.held = False
        LOCK.release()
        try:
            wait_for_messages(self, timeout)
        finally:
            LOCK.acquire()
            _HOLDING.held = True

    dispatcher.__call__ = serialized
    queue.wait_for_messages = waiting_unlocked
    setattr(dispatcher, _PATCHED, True)


@contextlib.contextmanager
def _holding() -> Iterator[None]:
    """`LOCK`, held by this thread for one dispatch."""
    with LOCK:
        _HOLDING.held = True
        try:
            yield
        finally:
            _HOLDING.held = False
