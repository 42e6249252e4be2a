"""The interruption loop (aws: pkg/controllers/interruption/controller.go): long-poll the queue, handle up to 10
messages at once, act on each (events, unavailable offerings, NodeClaim deletion), delete the message once handled.

Every received message ends its pass acted on, left for a retry, or deleted as poison; none can stop its batch:
* a message the queue client could not read (`interruption.Unreadable`) is deleted at once, logged and counted
  (`Observer.dropped`) with its reason;
* a message whose handling failed on the API server or the network stays in the queue and comes back after its
  visibility timeout, until it has been received `MAX_RECEIVES` times: then it is dropped (retries_exhausted);
* a message whose handling raised anything else (a karpy bug) is dropped at once (internal_error), with its
  traceback in the log: a retry would fail the same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from karpy import backoff
from karpy.api import decoding, labels
from karpy.clock import Clock
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.interruption import handler
from karpy.interruption import observer as interruption_observer
from karpy.kube import client, resources
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

MAX_CONCURRENT_MESSAGES = 10
"""Messages handled in parallel (upstream parses and handles one receive batch, ≤ 10, concurrently)."""
ERROR_BACKOFF = 5.0
"""Seconds to wait after the queue itself failed (throttling, network) before polling again."""
# Aliases: `Deps.queue` below shadows the module name inside the class body.
QueueClient = cloudprovider_parts.QueueClient
OfferingMarker = cloudprovider_parts.OfferingMarker

SYNC_POLL = 1.0
"""Seconds between checks while waiting for the cluster state's first LISTs (instances → NodeClaims needs it)."""
MAX_RECEIVES = 5
"""Receives after which a message whose handling keeps failing is dropped: with the 20 s visibility timeout, about
100 s of retries, most of a spot warning's two minutes; the instance's own state change follows anyway."""
TRANSIENT_ERRORS = (client.KubeError, OSError, TimeoutError)
"""Failures a later attempt may not meet (the API server or the network); anything else is not retried."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The interruption poller's collaborators; the only loop with a message `queue` and the offering cache."""

    client: client.KubeClient
    cluster: state_cluster.Cluster
    queue: QueueClient
    clock: Clock
    observer: interruption_observer.Observer
    offerings: OfferingMarker | None = None  # the provider's unavailable-offerings cache, when it has one


@dataclasses.dataclass(frozen=True, slots=True)
class Handled:
    message: interruption.Message
    decisions: tuple[handler.Decision, ...]
    deleted_from_queue: bool


class InterruptionController:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def run(self) -> None:
        """Poll forever; cancel the task to stop."""
        await self._wait_synced()
        await backoff.forever(
            self.poll, clock=self._deps.clock, log=log, what="polling the interruption queue", delay=ERROR_BACKOFF
        )

    async def poll(self) -> list[Handled]:
        """One long poll and the handling of everything it returned."""
        deps = self._deps
        received = await deps.queue.receive()
        if not received:
            return []
        readable = []
        for item in received:
            if isinstance(item, interruption.Unreadable):
                log.warning(
                    "dropping unreadable interruption message",
                    extra={"message-id": item.message_id, "reason": str(item.reason), "error": item.detail},
                )
                await self._drop(item, item.reason)
            else:
                deps.observer.received(item.message)
                readable.append(item)
        targets = handler.index_by_instance(deps.cluster.nodeclaims())
        annotations = {p.name: dict(p.metadata.annotations) for p in deps.cluster.nodepools()}
        limit = asyncio.Semaphore(MAX_CONCURRENT_MESSAGES)

        async def bounded(r: interruption.Received) -> Handled:
            async with limit:
                return await self.handle(r, targets=targets, pool_annotations=annotations)

        return list(await asyncio.gather(*(bounded(r) for r in readable)))

    async def handle(
        self,
        received: interruption.Received,
        *,
        targets: dict[str, handler.Target],
        pool_annotations: dict[str, dict[str, str]],
    ) -> Handled:
        """Act on one message and delete it; never raises (but for cancellation)."""
        deps = self._deps
        message = received.message
        fields = {"messageKind": message.kind.value, "event-id": message.event_id}
        decisions: tuple[handler.Decision, ...] = ()
        try:
            decisions = tuple(handler.decide(message, targets, pool_annotations=pool_annotations))
            for decision in decisions:
                await self._act(message, decision)
            deps.observer.handled(message, acted=bool(decisions), now=deps.clock.now())
        except TRANSIENT_ERRORS as exc:
            deps.observer.failed(message)
            if received.receive_count < MAX_RECEIVES:
                log.error(
                    "handling interruption message failed, leaving it for a retry", extra={**fields, "error": str(exc)}
                )
                return Handled(message, decisions, deleted_from_queue=False)
            log.error(
                "handling interruption message failed, dropping it",
                extra={**fields, "error": str(exc), "receives": received.receive_count},
            )
            return Handled(message, decisions, await self._drop(received, interruption.DropReason.RETRIES_EXHAUSTED))
        except Exception:
            log.exception("handling interruption message raised, dropping it", extra=fields)
            return Handled(message, decisions, await self._drop(received, interruption.DropReason.INTERNAL_ERROR))
        if not await self._delete(received):
            return Handled(message, decisions, deleted_from_queue=False)
        deps.observer.deleted(message)
        return Handled(message, decisions, deleted_from_queue=True)

    async def _drop(
        self,
        item: interruption.Received | interruption.Unreadable,
        reason: interruption.DropReason,
    ) -> bool:
        deleted = await self._delete(item)
        if deleted:
            self._deps.observer.dropped(reason)
        return deleted

    async def _delete(self, item: interruption.Received | interruption.Unreadable) -> bool:
        """Delete from the queue; a failure is logged and the message comes back after its visibility timeout."""
        try:
            await self._deps.queue.delete(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error(
                "deleting interruption message failed: %s: %s", type(exc).__name__, exc, extra={"error": str(exc)}
            )
            return False
        return True

    async def _act(self, message: interruption.Message, decision: handler.Decision) -> None:
        deps = self._deps
        target = decision.target
        if decision.unavailable is not None and deps.offerings is not None:
            u = decision.unavailable
            deps.offerings.mark(u.instance_type, u.zone, u.capacity_type)
        for notice in decision.notices:
            deps.observer.noticed(target, notice)
        if decision.terminate_now:
            # Upstream's ForcefulTermination: the termination controller treats the claim's grace period as over.
            now = decoding.format_timestamp(deps.clock.now())
            key = labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
            await deps.client.patch(resources.NODECLAIMS, target.nodeclaim, {"metadata": {"annotations": {key: now}}})
        action = interruption.Action.NO_ACTION
        if decision.delete:
            forceful = message.action is interruption.Action.FORCEFUL_TERMINATION
            action = interruption.Action.FORCEFUL_TERMINATION if forceful else interruption.Action.CORDON_AND_DRAIN
        deps.observer.acted(message, action)
        if decision.delete and await deps.client.delete(resources.NODECLAIMS, target.nodeclaim):
            # Logged and counted once the delete was accepted, as upstream does (not for a claim already gone).
            log.info(
                "initiating delete from interruption message",
                extra={
                    "messageKind": message.kind.value,
                    "action": action.value,
                    "nodeclaim": target.nodeclaim,
                    "node": target.node,
                },
            )
            deps.observer.interrupted(message, target)

    async def _wait_synced(self) -> None:
        while not self._deps.cluster.synced():
            await self._deps.clock.sleep(SYNC_POLL)
