"""The interruption queue: long-poll SQS, parse EventBridge events into domain messages, delete after handling.

An unparseable message is logged, counted and deleted at once so it can never be retried forever
(aws: pkg/providers/sqs, pkg/controllers/interruption/messages).
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any

from karpy.cloudprovider.aws import clients
from karpy.interruption import messages

log = logging.getLogger(__name__)

WAIT_TIME_SECONDS = 20
MAX_MESSAGES = 10
VISIBILITY_TIMEOUT = 20
STOPPED_STATES = frozenset({"stopping", "stopped"})
TERMINATED_STATES = frozenset({"shutting-down", "terminated"})


class UnparseableMessage(ValueError):
    pass


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse(body: str) -> messages.Message:
    """One EventBridge event (the SQS body) → a domain message; filtered-out events are `NO_OP`."""
    try:
        event = json.loads(body)
    except json.JSONDecodeError as exc:
        raise UnparseableMessage(f"not JSON: {exc}") from exc
    if not isinstance(event, Mapping) or not isinstance(event.get("detail"), Mapping):
        raise UnparseableMessage("not an EventBridge event (no detail)")
    source, kind, detail = event.get("source"), event.get("detail-type"), event["detail"]
    base: dict[str, Any] = {"event_id": str(event.get("id", "")), "event_time": _time(event.get("time"))}

    def instance() -> tuple[str, ...]:
        instance_id = detail.get("instance-id")
        if not isinstance(instance_id, str) or not instance_id:
            raise UnparseableMessage(f"{kind}: detail.instance-id missing")
        return (instance_id,)

    if source == "aws.ec2" and kind == "EC2 Spot Instance Interruption Warning":
        return messages.Message(messages.Kind.SPOT_INTERRUPTION, instance(), **base)
    if source == "aws.ec2" and kind == "EC2 Instance Rebalance Recommendation":
        return messages.Message(messages.Kind.REBALANCE_RECOMMENDATION, instance(), **base)
    if source == "aws.ec2" and kind == "EC2 Instance State-change Notification":
        state = str(detail.get("state", ""))
        if state in STOPPED_STATES:
            return messages.Message(messages.Kind.INSTANCE_STOPPED, instance(), detail=state, **base)
        if state in TERMINATED_STATES:
            return messages.Message(messages.Kind.INSTANCE_TERMINATED, instance(), detail=state, **base)
        return messages.Message(messages.Kind.NO_OP, instance(), detail=f"state {state}", **base)
    if source == "aws.ec2" and kind == "EC2 Capacity Reservation Instance Interruption Warning":
        return messages.Message(messages.Kind.CAPACITY_RESERVATION_INTERRUPTION, instance(), **base)
    if source == "aws.health" and kind == "AWS Health Event":
        entities = detail.get("affectedEntities") or ()
        ids = tuple(str(e["entityValue"]) for e in entities if isinstance(e, Mapping) and e.get("entityValue"))
        code = str(detail.get("eventTypeCode", ""))
        if detail.get("service") == "EC2" and detail.get("eventTypeCategory") == "scheduledChange":
            return messages.Message(messages.Kind.SCHEDULED_CHANGE, ids, detail=code, **base)
        return messages.Message(messages.Kind.NO_OP, ids, detail=code, **base)
    raise UnparseableMessage(f"unknown event {source}/{kind}")


class InterruptionQueue:
    """One SQS queue (by name). `unparseable` counts messages dropped because they could not be parsed."""

    def __init__(self, *, aws: clients.Clients, queue_name: str) -> None:
        self._aws = aws
        self._queue_name = queue_name
        self._url = ""
        self.unparseable = 0

    async def url(self) -> str:
        if not self._url:
            self._url = str(
                (await clients.call(self._aws.sqs, "get_queue_url", QueueName=self._queue_name))["QueueUrl"]
            )
        return self._url

    async def receive(self, *, wait_seconds: int = WAIT_TIME_SECONDS) -> list[messages.Received]:
        """Long-poll once; parsed messages are returned for handling, broken ones deleted here."""
        response = await clients.call(
            self._aws.sqs,
            "receive_message",
            QueueUrl=await self.url(),
            MaxNumberOfMessages=MAX_MESSAGES,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=VISIBILITY_TIMEOUT,
        )
        out = []
        for raw in response.get("Messages") or ():
            try:
                out.append(messages.Received(parse(str(raw.get("Body", ""))), str(raw["ReceiptHandle"])))
            except UnparseableMessage as exc:
                self.unparseable += 1
                log.warning("dropping unparseable interruption message %s: %s", raw.get("MessageId", ""), exc)
                await self._delete(str(raw["ReceiptHandle"]))
        return out

    async def delete(self, received: messages.Received) -> None:
        await self._delete(received.receipt_handle)

    async def _delete(self, receipt_handle: str) -> None:
        await clients.call(self._aws.sqs, "delete_message", QueueUrl=await self.url(), ReceiptHandle=receipt_handle)
