"""The seams the interruption reconciler needs from the cloud side, as structural protocols.

`QueueClient` is what `karpy.cloudprovider.aws.interruption_queue.InterruptionQueue` offers (long-poll receive of parsed
messages and of the unreadable ones, delete after handling); `OfferingMarker` is the shape of the AWS
provider's unavailable-offerings cache (`AWSCloudProvider.unavailable.mark`). The operator binds the real objects;
tests pass in-memory ones. Nothing here imports AWS code.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from karpy.cloudprovider import interruption

log = logging.getLogger(__name__)


class QueueClient(Protocol):
    async def receive(self, *, wait_seconds: int = ...) -> Sequence[interruption.Received | interruption.Unreadable]:
        """Long-poll once and return the messages (up to 10): parsed, or unreadable for the caller to drop."""
        ...

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        """Remove a handled (or poison) message from the queue."""
        ...


class OfferingMarker(Protocol):
    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Stop offering (instance type, zone, capacity pool) for a while (upstream: 3 min ICE cache). The pool is
        the capacity type (spot, on-demand), or a capacity reservation's id for reserved capacity: each
        reservation is its own pool."""
        ...


class DryRunQueue:
    """DRY_RUN: messages are received and acted on as far as a dry run acts (logged decisions), but never deleted,
    so the autoscaler that really handles them (upstream Karpenter during a migration) still gets every one once
    the visibility timeout lapses."""

    def __init__(self, inner: QueueClient, *, logger: logging.Logger = log) -> None:
        self._inner = inner
        self._log = logger

    async def receive(self, *, wait_seconds: int = 20) -> Sequence[interruption.Received | interruption.Unreadable]:
        return await self._inner.receive(wait_seconds=wait_seconds)

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        if isinstance(received, interruption.Unreadable):
            self._log.info(
                "dry run: would delete the unreadable interruption message", extra={"reason": received.reason}
            )
            return
        message = received.message
        self._log.info(
            "dry run: would delete the interruption message",
            extra={"messageKind": str(message.kind), "instances": list(message.instance_ids)},
        )
