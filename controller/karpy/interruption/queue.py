"""The seams the interruption reconciler needs from the cloud side, as structural protocols.

`QueueClient` is what `karpy.cloudprovider.aws.interruption.InterruptionQueue` offers (long-poll receive, delete
after handling, a count of unparseable messages it already dropped); `OfferingMarker` is the shape of the AWS
provider's unavailable-offerings cache (`AWSCloudProvider.unavailable.mark`). The operator binds the real objects;
tests pass in-memory ones. Nothing here imports AWS code.
"""

from __future__ import annotations

from typing import Protocol

from karpy.interruption import messages


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
