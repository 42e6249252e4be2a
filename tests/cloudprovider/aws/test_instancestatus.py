"""The DescribeInstanceStatus poll: findings (pure, table tests) and the QueueClient-shaped poller (Stubber)."""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore import stub
from tests.cloudprovider.aws.builders import make_nodeclaim
from tests.cloudprovider.aws.conftest import Clock

from karpy.cloudprovider.aws import clients, instancestatus
from karpy.interruption import messages, queue

F = instancestatus.Finding
K = instancestatus.FindingKind
_NOT_BEFORE = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
_OK = {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]}


def _entry(instance_id: str = "i-1", **extra: Any) -> dict[str, Any]:
    return {"InstanceId": instance_id, "InstanceStatus": _OK, "SystemStatus": _OK, **extra}


def _event(code: str, description: str = "scheduled") -> dict[str, Any]:
    return {"Code": code, "Description": description, "NotBefore": _NOT_BEFORE}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (_entry(), []),
        (
            _entry(InstanceStatus={"Status": "impaired", "Details": [{"Name": "reachability", "Status": "failed"}]}),
            [F(K.INSTANCE_STATUS, "i-1", "reachability")],
        ),
        (_entry(SystemStatus={"Status": "impaired"}), [F(K.SYSTEM_STATUS, "i-1", "impaired")]),
        (
            _entry(Events=[_event("instance-retirement"), _event("system-reboot", "[Completed] done")]),
            [F(K.EVENT_STATUS, "i-1", "instance-retirement", event_time=_NOT_BEFORE.timestamp())],
        ),
        (_entry(Events=[_event("instance-stop", "[Canceled] no longer needed")]), []),
        ({"InstanceStatus": {"Status": "impaired"}}, []),  # no instance id: nothing to act on
    ],
)
def test_parse(entry: dict[str, Any], expected: list[instancestatus.Finding]) -> None:
    assert instancestatus.parse([entry]) == expected


def test_scheduled_events_are_scheduled_changes_and_impaired_has_no_message_yet() -> None:
    event = F(K.EVENT_STATUS, "i-1", "system-maintenance", event_time=5.0)
    message = instancestatus.to_message(event)
    assert message is not None
    assert message.kind is messages.Kind.SCHEDULED_CHANGE
    assert message.instance_ids == ("i-1",)
    assert message.detail == "system-maintenance"
    assert message.action is messages.Action.CORDON_AND_DRAIN
    assert instancestatus.to_message(F(K.SYSTEM_STATUS, "i-1", "impaired")) is None


class _Poll:
    def __init__(self) -> None:
        self.ec2 = boto3.client(
            "ec2",
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        self.stubber = stub.Stubber(self.ec2)
        self.clock = Clock()
        self.slept: list[float] = []

        async def sleep(seconds: float) -> None:
            self.slept.append(seconds)
            self.clock.step(seconds)

        self.poller = instancestatus.InstanceStatusPoller(
            aws=clients.Clients(ec2=self.ec2, ssm=None, iam=None, eks=None, sqs=None, pricing=None),
            clock=self.clock,
            sleep=sleep,
        )

    def answer(self, *entries: dict[str, Any]) -> None:
        self.stubber.add_response(
            "describe_instance_status", {"InstanceStatuses": list(entries)}, {"IncludeAllInstances": False}
        )


async def test_poller_reports_once_per_minute_and_remembers_handled_findings() -> None:
    poll = _Poll()
    client: queue.QueueClient = poll.poller  # the interruption reconciler's seam
    retiring = _entry("i-1", Events=[_event("instance-retirement")])
    impaired = _entry("i-2", SystemStatus={"Status": "impaired"})
    with poll.stubber:
        poll.answer(retiring, impaired)
        (first,) = await client.receive()
        assert first.message.instance_ids == ("i-1",)
        assert poll.poller.impaired == 1
        # Within the minute: waits (at most wait_seconds) and polls nothing.
        poll.clock.step(10)
        assert await client.receive(wait_seconds=20) == []
        assert poll.slept == [20]
        # Not handled: reported again at the next poll, like an undeleted SQS message.
        poll.answer(retiring, impaired)
        (again,) = await client.receive(wait_seconds=60)  # sleeps only until the poll is due
        assert again == first
        assert poll.slept == [20, 30]
        assert poll.poller.impaired == 1  # the same impaired instance is counted once while it lasts
        await client.delete(again)
        # Handled and still shown: not repeated.
        poll.clock.step(60)
        poll.answer(retiring)
        assert await client.receive() == []
        # Gone, then back: reported anew.
        poll.clock.step(60)
        poll.answer()
        assert await client.receive() == []
        poll.clock.step(60)
        poll.answer(retiring)
        assert [r.message.detail for r in await client.receive()] == ["instance-retirement"]
        poll.stubber.assert_no_pending_responses()
    assert client.unparseable == 0


async def test_poller_on_the_emulator_sees_healthy_instances_only(ready: Any) -> None:
    aws_provider, _ = ready
    await aws_provider.create(make_nodeclaim())
    statuses: list[dict[str, Any]] = []
    ec2 = aws_provider._deps.aws.ec2
    ec2.meta.events.register(
        "after-call.ec2.DescribeInstanceStatus", lambda parsed, **_: statuses.extend(parsed["InstanceStatuses"])
    )
    poller = instancestatus.InstanceStatusPoller(aws=aws_provider._deps.aws, clock=Clock())
    assert await poller.receive() == []
    assert statuses  # the launched instance is running and was looked at
    assert instancestatus.parse(statuses) == []
    assert poller.impaired == 0
