"""Interruption queue: EventBridge put_events → rule → SQS → parser, for all five kinds; broken messages dropped."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from tests.cloudprovider.aws.moto_fixtures import REGION

from karpy.cloudprovider import interruption
from karpy.cloudprovider.aws import clients, interruption_queue
from karpy_emulator.aws import seeding

EVENTS: list[tuple[str, str, dict[str, Any], interruption.Kind, tuple[str, ...]]] = [
    (
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        {"instance-id": "i-1", "instance-action": "terminate"},
        interruption.Kind.SPOT_INTERRUPTION,
        ("i-1",),
    ),
    (
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
        {"instance-id": "i-2"},
        interruption.Kind.REBALANCE_RECOMMENDATION,
        ("i-2",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-3", "state": "stopping"},
        interruption.Kind.INSTANCE_STOPPED,
        ("i-3",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-4", "state": "terminated"},
        interruption.Kind.INSTANCE_TERMINATED,
        ("i-4",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-5", "state": "running"},
        interruption.Kind.NO_OP,
        ("i-5",),
    ),
    (
        "aws.health",
        "AWS Health Event",
        {
            "service": "EC2",
            "eventTypeCategory": "scheduledChange",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "affectedEntities": [{"entityValue": "i-6"}, {"entityValue": "i-7"}],
        },
        interruption.Kind.SCHEDULED_CHANGE,
        ("i-6", "i-7"),
    ),
    (
        "aws.health",
        "AWS Health Event",
        {"service": "RDS", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "db-1"}]},
        interruption.Kind.NO_OP,
        ("db-1",),
    ),
    # Only an EC2 scheduled change drains a node: an EC2 `issue` (an outage notice) or `accountNotification`
    # names instances too, and acting on it would drain healthy nodes (aws: pkg/controllers/interruption/messages/
    # scheduledchange/parser.go, acceptedEventTypeCategory).
    (
        "aws.health",
        "AWS Health Event",
        {
            "service": "EC2",
            "eventTypeCategory": "issue",
            "eventTypeCode": "AWS_EC2_OPERATIONAL_ISSUE",
            "affectedEntities": [{"entityValue": "i-9"}],
        },
        interruption.Kind.NO_OP,
        ("i-9",),
    ),
    (
        "aws.health",
        "AWS Health Event",
        {
            "service": "EC2",
            "eventTypeCategory": "accountNotification",
            "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
            "affectedEntities": [{"entityValue": "i-10"}],
        },
        interruption.Kind.NO_OP,
        ("i-10",),
    ),
    (
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        {"instance-id": "i-8", "instance-action": "terminate"},
        interruption.Kind.CAPACITY_RESERVATION_INTERRUPTION,
        ("i-8",),
    ),
]


@pytest.mark.parametrize(("source", "detail_type", "detail", "kind", "ids"), EVENTS)
def test_parse(
    source: str,
    detail_type: str,
    detail: dict[str, object],
    kind: interruption.Kind,
    ids: tuple[str, ...],
) -> None:
    body = json.dumps(
        {"id": "e1", "source": source, "detail-type": detail_type, "time": "2026-11-21T10:00:00Z", "detail": detail}
    )
    message = interruption_queue.parse(body)
    assert message.kind is kind
    assert message.instance_ids == ids
    assert message.event_time == 1_795_255_200.0


def _event(source: str, detail_type: str, detail: object) -> str:
    return json.dumps({"id": "e1", "source": source, "detail-type": detail_type, "detail": detail})


SPOT = "EC2 Spot Instance Interruption Warning"
HEALTH = "AWS Health Event"
DROP = interruption.DropReason
POISON: list[tuple[str, str, interruption.DropReason]] = [
    ("not json", "not JSON", DROP.NOT_JSON),
    ("[" * 120_000 + "]" * 120_000, "nested too deeply", DROP.NOT_JSON),
    ('{"id": ' + "9" * 5000 + "}", "not JSON", DROP.NOT_JSON),  # Python reads at most 4,300 digits
    ("", "not JSON", DROP.NOT_JSON),
    ("[]", "no detail object", DROP.MALFORMED),
    (json.dumps({"source": "aws.ec2"}), "no detail object", DROP.MALFORMED),
    (json.dumps({"source": "aws.ec2", "detail-type": SPOT, "detail": 5}), "no detail object", DROP.MALFORMED),
    (_event("aws.ec2", SPOT, {}), "detail.instance-id: must be a non-empty string", DROP.MALFORMED),
    (_event("aws.ec2", SPOT, {"instance-id": ["i-1"]}), "detail.instance-id", DROP.MALFORMED),
    (_event("aws.ec2", SPOT, {"instance-id": ""}), "detail.instance-id", DROP.MALFORMED),
    (_event(5, SPOT, {"instance-id": "i-1"}), "source: must be a string", DROP.MALFORMED),  # type: ignore[arg-type]
    (
        _event("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-1", "state": 3}),
        "detail.state",
        DROP.MALFORMED,
    ),
    (_event("aws.health", HEALTH, {"affectedEntities": 5}), "detail.affectedEntities: must be a list", DROP.MALFORMED),
    (_event("aws.health", HEALTH, {"affectedEntities": [5]}), "affectedEntities[0]: must be an object", DROP.MALFORMED),
    (
        _event("aws.health", HEALTH, {"affectedEntities": [{"entityValue": {"id": "i-1"}}]}),
        "affectedEntities[0].entityValue",
        DROP.MALFORMED,
    ),
    (_event("aws.health", HEALTH, {"service": ["EC2"]}), "detail.service", DROP.MALFORMED),
    (_event("x", "y", {}), "unknown event x/y", DROP.UNKNOWN_EVENT),
]


@pytest.mark.parametrize(("body", "says", "reason"), POISON, ids=[f"poison-{i}" for i in range(len(POISON))])
def test_poison_is_refused_with_a_reason_and_a_short_message(
    body: str, says: str, reason: interruption.DropReason
) -> None:
    with pytest.raises(interruption_queue.UnparseableMessage) as caught:
        interruption_queue.parse(body)
    assert caught.value.reason is reason
    assert says in str(caught.value)
    assert len(str(caught.value)) <= interruption_queue.DETAIL_LIMIT


def test_read_never_raises_and_keeps_the_receive_count() -> None:
    def broken(_: str) -> interruption.Message:
        raise KeyError("a parser bug")

    good = {"ReceiptHandle": "h1", "MessageId": "m1", "Body": _event("aws.ec2", SPOT, {"instance-id": "i-1"})}
    good["Attributes"] = {"ApproximateReceiveCount": "3"}  # type: ignore[assignment]
    read = interruption_queue.read(good)
    assert isinstance(read, interruption.Received)
    assert (read.receipt_handle, read.receive_count, read.message.instance_ids) == ("h1", 3, ("i-1",))
    bug = interruption_queue.read(good, parser=broken)
    assert isinstance(bug, interruption.Unreadable)
    assert (bug.receipt_handle, bug.reason, bug.message_id) == ("h1", DROP.INTERNAL_ERROR, "m1")
    assert "KeyError" in bug.detail
    no_body = interruption_queue.read({"ReceiptHandle": "h2"})
    assert isinstance(no_body, interruption.Unreadable)
    assert no_body.reason is DROP.NOT_JSON


async def test_eventbridge_to_queue_end_to_end(seeded: seeding.Seeded, aws: clients.Clients) -> None:
    for source, detail_type, detail, _, _ in EVENTS:
        seeding.put_event(region=REGION, source=source, detail_type=detail_type, detail=detail)
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(QueueUrl=seeded.queue_url, MessageBody="garbage")
    queue = interruption_queue.InterruptionQueue(aws=aws, queue_name=seeded.queue_name)
    received: list[interruption.Received] = []
    unreadable: list[interruption.Unreadable] = []
    for _ in range(5):  # bounded: each receive takes at most 10 messages, and wait 0 s
        batch = await queue.receive(wait_seconds=0)
        for item in batch:
            (unreadable if isinstance(item, interruption.Unreadable) else received).append(item)  # type: ignore[arg-type]
            await queue.delete(item)
        if len(received) == len(EVENTS) and len(unreadable) == 1:
            break
    assert sorted((m.message.kind, m.message.instance_ids) for m in received) == sorted((e[3], e[4]) for e in EVENTS)
    assert all(m.receive_count == 1 for m in received), "SQS counts receives: these are first receives"
    assert [u.reason for u in unreadable] == [DROP.NOT_JSON]
    attrs = sqs.get_queue_attributes(
        QueueUrl=seeded.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
