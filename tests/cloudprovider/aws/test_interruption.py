"""Interruption queue: EventBridge put_events → rule → SQS → parser, for all five kinds; broken messages dropped."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from tests.cloudprovider.aws.moto_fixtures import REGION

from karpy.cloudprovider.aws import clients, emulator, interruption
from karpy.interruption import messages

EVENTS: list[tuple[str, str, dict[str, Any], messages.Kind, tuple[str, ...]]] = [
    (
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        {"instance-id": "i-1", "instance-action": "terminate"},
        messages.Kind.SPOT_INTERRUPTION,
        ("i-1",),
    ),
    (
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
        {"instance-id": "i-2"},
        messages.Kind.REBALANCE_RECOMMENDATION,
        ("i-2",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-3", "state": "stopping"},
        messages.Kind.INSTANCE_STOPPED,
        ("i-3",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-4", "state": "terminated"},
        messages.Kind.INSTANCE_TERMINATED,
        ("i-4",),
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-5", "state": "running"},
        messages.Kind.NO_OP,
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
        messages.Kind.SCHEDULED_CHANGE,
        ("i-6", "i-7"),
    ),
    (
        "aws.health",
        "AWS Health Event",
        {"service": "RDS", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "db-1"}]},
        messages.Kind.NO_OP,
        ("db-1",),
    ),
    (
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        {"instance-id": "i-8", "instance-action": "terminate"},
        messages.Kind.CAPACITY_RESERVATION_INTERRUPTION,
        ("i-8",),
    ),
]


@pytest.mark.parametrize(("source", "detail_type", "detail", "kind", "ids"), EVENTS)
def test_parse(
    source: str, detail_type: str, detail: dict[str, object], kind: messages.Kind, ids: tuple[str, ...]
) -> None:
    body = json.dumps(
        {"id": "e1", "source": source, "detail-type": detail_type, "time": "2026-11-21T10:00:00Z", "detail": detail}
    )
    message = interruption.parse(body)
    assert message.kind is kind
    assert message.instance_ids == ids
    assert message.event_time == 1_795_255_200.0


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        json.dumps({"source": "aws.ec2"}),
        json.dumps({"source": "x", "detail-type": "y", "detail": {}}),
        json.dumps({"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning", "detail": {}}),
    ],
)
def test_unparseable(body: str) -> None:
    with pytest.raises(interruption.UnparseableMessage):
        interruption.parse(body)


async def test_eventbridge_to_queue_end_to_end(seeded: emulator.Seeded, aws: clients.Clients) -> None:
    for source, detail_type, detail, _, _ in EVENTS:
        emulator.put_event(region=REGION, source=source, detail_type=detail_type, detail=detail)
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(QueueUrl=seeded.queue_url, MessageBody="garbage")
    queue = interruption.InterruptionQueue(aws=aws, queue_name=seeded.queue_name)
    received: list[messages.Received] = []
    for _ in range(5):  # bounded: each receive takes at most 10 messages, and wait 0 s
        batch = await queue.receive(wait_seconds=0)
        received += batch
        for item in batch:
            await queue.delete(item)
        if len(received) == len(EVENTS) and queue.unparseable == 1:
            break
    assert sorted((m.message.kind, m.message.instance_ids) for m in received) == sorted((e[3], e[4]) for e in EVENTS)
    assert queue.unparseable == 1
    attrs = sqs.get_queue_attributes(
        QueueUrl=seeded.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
