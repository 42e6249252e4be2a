"""The seams the interruption reconciler needs from the cloud side, as structural protocols.

`QueueClient` is what `karpy.cloudprovider.aws.interruption.InterruptionQueue` offers (long-poll receive, delete
after handling, a count of unparseable messages it already dropped); `OfferingMarker` is the shape of the AWS
provider's unavailable-offerings cache (`AWSCloudProvider.unavailable.mark`). The operator binds the real objects;
tests pass in-memory ones. Nothing here imports AWS code.
"""

from __future__ import annotations

import logging
from typing import Protocol

from karpy.interruption import messages

log = logging.getLogger(__name__)


class QueueClient(Protocol):
    @property
    def unparseable(self) -> int:
        """How many messages the client could not parse (and deleted) so far."""
        ...

    async def receive(self, *, wait_seconds: int = ...) -> list[messages.Received]:
        """Long-poll once and return the parsed messages (up to 10)."""
        ...

    async def delete(self, received: messages.Received) -> None:
        """Remove a handled message from the queue."""
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

    @property
    def unparseable(self) -> int:
        return self._inner.unparseable

    async def receive(self, *, wait_seconds: int = 20) -> list[messages.Received]:
        return await self._inner.receive(wait_seconds=wait_seconds)

    async def delete(self, received: messages.Received) -> None:
        message = received.message
        self._log.info(
            "dry run: would delete the interruption message",
            extra={"messageKind": str(message.kind), "instances": list(message.instance_ids)},
        )
