"""Watch events owed to a watch's client, reported as work in flight to the emulation's clock.

A write is answered before its change reaches the watches: the store publishes the change, and each watch stream's
task, on the server's thread, sends it when that thread next runs. Nothing is in flight meanwhile, so on the autojump
clock (`karpy_emulator.autojump`) a server thread left waiting for a core (a loaded machine) let time jump on before
the change reached the controller that waits for it: a starved run could spend virtual seconds a quiet one does not.
So a stream counts as busy from the moment the store owes it a change until it has handed the last one owed to its
connection.
"""

from __future__ import annotations

import contextlib

from karpy import clock as karpy_clock


class Owed:
    """How many changes one watch stream has yet to send; busy on `activity` while there are any. Runs on the server's
    loop (one thread), so the count needs no lock; `activity` is thread-safe."""

    def __init__(self, activity: karpy_clock.Activity) -> None:
        self._activity = activity
        self._count = 0
        self._held: contextlib.AbstractContextManager[None] | None = None

    @property
    def count(self) -> int:
        return self._count

    def add(self, changes: int = 1) -> None:
        if changes <= 0:
            return
        if self._held is None:
            self._held = self._activity.busy()
            self._held.__enter__()
        self._count += changes

    def settle(self) -> None:
        """One change sent, or skipped as invisible to the watch."""
        self._count = max(0, self._count - 1)
        if not self._count:
            self.release()

    def release(self) -> None:
        """The stream ended: what it still owed will never be sent."""
        self._count = 0
        held, self._held = self._held, None
        if held is not None:
            held.__exit__(None, None, None)
