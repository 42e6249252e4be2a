"""The interruption queue: long-poll SQS, parse EventBridge events into domain messages, delete after handling.

Parsing is strict about shape and never raises anything but `UnparseableMessage`: a body that is not JSON (bad
syntax, 120,000 nested brackets, a 5,000-digit integer) or not the event it claims to be (`"affectedEntities": 5`)
comes back from `receive` as `interruption.Unreadable`, which the interruption controller deletes as poison in the same
pass as the rest of its batch (aws: pkg/controllers/interruption/controller.go deletes what it cannot parse).
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy.cloudprovider import interruption
from karpy.cloudprovider.aws import clients

log = logging.getLogger(__name__)

WAIT_TIME_SECONDS = 20
MAX_MESSAGES = 10
VISIBILITY_TIMEOUT = 20
STOPPED_STATES = frozenset({"stopping", "stopped"})
TERMINATED_STATES = frozenset({"shutting-down", "terminated"})
DETAIL_LIMIT = 200
"""Characters of a parse problem kept for logs (a problem never quotes the body whole)."""


class UnparseableMessage(ValueError):
    def __init__(self, reason: interruption.DropReason, detail: str) -> None:
        super().__init__(detail[:DETAIL_LIMIT])
        self.reason = reason


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return None


def _malformed(what: str) -> UnparseableMessage:
    return UnparseableMessage(interruption.DropReason.MALFORMED, what)


def _text(obj: Mapping[str, Any], key: str, *, where: str, required: bool = False) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise _malformed(f"{where}{key}: must be a {'non-empty ' if required else ''}string")
    return value


def _decode(body: str) -> Any:
    try:
        return json.loads(body)
    except RecursionError as exc:
        raise UnparseableMessage(interruption.DropReason.NOT_JSON, "not JSON: nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, and integers longer than Python reads (4,300 digits)
        raise UnparseableMessage(interruption.DropReason.NOT_JSON, f"not JSON: {exc}") from exc


def _health_instances(detail: Mapping[str, Any]) -> tuple[str, ...]:
    entities = detail.get("affectedEntities")
    if entities is None:
        return ()
    if not isinstance(entities, list):
        raise _malformed("detail.affectedEntities: must be a list")
    ids = []
    for i, entity in enumerate(entities):
        if not isinstance(entity, Mapping):
            raise _malformed(f"detail.affectedEntities[{i}]: must be an object")
        value = _text(entity, "entityValue", where=f"detail.affectedEntities[{i}].")
        if value:
            ids.append(value)
    return tuple(ids)


def parse(body: str) -> interruption.Message:
    """One EventBridge event (the SQS body) → a domain message; filtered-out events are `NO_OP`.

    Raises `UnparseableMessage` (with a drop reason) for everything else."""
    event = _decode(body)
    if not isinstance(event, Mapping) or not isinstance(event.get("detail"), Mapping):
        raise _malformed("not an EventBridge event (no detail object)")
    source = _text(event, "source", where="")
    kind = _text(event, "detail-type", where="")
    detail: Mapping[str, Any] = event["detail"]
    base: dict[str, Any] = {"event_id": _text(event, "id", where=""), "event_time": _time(event.get("time"))}

    def instance() -> tuple[str, ...]:
        return (_text(detail, "instance-id", where="detail.", required=True),)

    if source == "aws.ec2" and kind == "EC2 Spot Instance Interruption Warning":
        return interruption.Message(interruption.Kind.SPOT_INTERRUPTION, instance(), **base)
    if source == "aws.ec2" and kind == "EC2 Instance Rebalance Recommendation":
        return interruption.Message(interruption.Kind.REBALANCE_RECOMMENDATION, instance(), **base)
    if source == "aws.ec2" and kind == "EC2 Instance State-change Notification":
        state = _text(detail, "state", where="detail.")
        if state in STOPPED_STATES:
            return interruption.Message(interruption.Kind.INSTANCE_STOPPED, instance(), detail=state, **base)
        if state in TERMINATED_STATES:
            return interruption.Message(interruption.Kind.INSTANCE_TERMINATED, instance(), detail=state, **base)
        return interruption.Message(interruption.Kind.NO_OP, instance(), detail=f"state {state}", **base)
    if source == "aws.ec2" and kind == "EC2 Capacity Reservation Instance Interruption Warning":
        return interruption.Message(interruption.Kind.CAPACITY_RESERVATION_INTERRUPTION, instance(), **base)
    if source == "aws.health" and kind == "AWS Health Event":
        ids = _health_instances(detail)
        code = _text(detail, "eventTypeCode", where="detail.")
        service = _text(detail, "service", where="detail.")
        category = _text(detail, "eventTypeCategory", where="detail.")
        if service == "EC2" and category == "scheduledChange":
            return interruption.Message(interruption.Kind.SCHEDULED_CHANGE, ids, detail=code, **base)
        return interruption.Message(interruption.Kind.NO_OP, ids, detail=code, **base)
    raise UnparseableMessage(interruption.DropReason.UNKNOWN_EVENT, f"unknown event {source[:60]}/{kind[:60]}")


def read(
    raw: Mapping[str, Any], *, parser: Callable[[str], interruption.Message] = parse
) -> interruption.Received | interruption.Unreadable:
    """One SQS message as received: parsed, or unreadable with why. Never raises: a parser bug makes the message
    poison too (logged with its traceback), so that it cannot block its batch or come back forever."""
    handle = str(raw.get("ReceiptHandle", ""))
    message_id = str(raw.get("MessageId", ""))
    body = raw.get("Body")
    try:
        message = parser(body if isinstance(body, str) else "")
    except UnparseableMessage as exc:
        return interruption.Unreadable(handle, exc.reason, str(exc), message_id)
    except Exception as exc:
        log.exception("parsing interruption message %s failed", message_id)
        return interruption.Unreadable(
            handle,
            interruption.DropReason.INTERNAL_ERROR,
            f"{type(exc).__name__}: {exc}"[:DETAIL_LIMIT],
            message_id,
        )
    attributes = raw.get("Attributes")
    count = attributes.get("ApproximateReceiveCount") if isinstance(attributes, Mapping) else None
    return interruption.Received(
        message, handle, receive_count=int(count) if isinstance(count, str) and count.isdigit() else 1
    )


class InterruptionQueue:
    """One SQS queue (by name)."""

    def __init__(self, *, aws: clients.Clients, queue_name: str) -> None:
        self._aws = aws
        self._queue_name = queue_name
        self._url = ""

    async def url(self) -> str:
        if not self._url:
            self._url = str(
                (await clients.call(self._aws.sqs, "get_queue_url", QueueName=self._queue_name))["QueueUrl"]
            )
        return self._url

    async def receive(
        self, *, wait_seconds: int = WAIT_TIME_SECONDS
    ) -> Sequence[interruption.Received | interruption.Unreadable]:
        """Long-poll once: every message comes back, parsed or unreadable; deleting is the caller's (DRY_RUN)."""
        response = await clients.call(
            self._aws.sqs,
            "receive_message",
            QueueUrl=await self.url(),
            MaxNumberOfMessages=MAX_MESSAGES,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=VISIBILITY_TIMEOUT,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [read(raw) for raw in response.get("Messages") or () if isinstance(raw, Mapping)]

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        await clients.call(
            self._aws.sqs, "delete_message", QueueUrl=await self.url(), ReceiptHandle=received.receipt_handle
        )
