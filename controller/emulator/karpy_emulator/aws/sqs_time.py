"""moto's SQS on the emulation's clock: visibility timeouts, delays and message timestamps read the cluster's clock
instead of the wall clock (part of the emulation, never of the runtime).

On the autojump clock a message whose deletion failed would otherwise come back only after its visibility timeout
of real time, while virtual time races ahead: a scenario on virtual time could not wait for a redelivery. The queue's
long poll is already played on the clock (`controlplane._ShortPollQueue` receives without waiting), so no receive
blocks on moto's own polling loop, which reads the same time. Reads moto's module globals (moto is pinned in
uv.lock).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from karpy import clock as karpy_clock


@contextlib.contextmanager
def on_clock(clock: karpy_clock.Clock) -> Iterator[None]:
    """While inside, moto's SQS (in this process) tells time by `clock`; restored on the way out."""
    from moto.sqs import models  # lazily: the controller image does not ship moto

    clocked: dict[str, Callable[[], float]] = {
        "unix_time": clock.now,
        "unix_time_millis": lambda: clock.now() * 1000.0,
    }
    saved = {name: getattr(models, name) for name in clocked}
    for name, function in clocked.items():
        setattr(models, name, function)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(models, name, function)
