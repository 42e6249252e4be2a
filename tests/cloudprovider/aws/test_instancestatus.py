"""The DescribeInstanceStatus poll: findings (pure, table tests) and the QueueClient-shaped poller (Stubber)."""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore import stub
from moto.ec2.models import instances as models_instances
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import Clock

from karpy import events
from karpy.api import decoding, labels
from karpy.clock import ManualClock
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import clients, instances, instancestatus
from karpy.interruption import controller as interruption_controller
from karpy.interruption import observer as interruption_observer
from karpy.kube import fake, resources

F = instancestatus.Finding
K = instancestatus.FindingKind
_NOT_BEFORE = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
_MINUTE = datetime.timedelta(minutes=1)
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
        # The earliest ImpairedSince of the failed checks is when the finding started.
        (
            _entry(
                SystemStatus={
                    "Status": "impaired",
                    "Details": [
                        {"Name": "reachability", "Status": "failed", "ImpairedSince": _NOT_BEFORE},
                        {"Name": "other", "Status": "failed", "ImpairedSince": _NOT_BEFORE - _MINUTE},
                        {"Name": "fine", "Status": "passed", "ImpairedSince": _NOT_BEFORE - 9 * _MINUTE},
                    ],
                }
            ),
            [F(K.SYSTEM_STATUS, "i-1", "reachability,other", event_time=(_NOT_BEFORE - _MINUTE).timestamp())],
        ),
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


def test_scheduled_events_drain_and_impaired_checks_terminate_forcefully() -> None:
    event = instancestatus.to_message(F(K.EVENT_STATUS, "i-1", "system-maintenance", event_time=5.0))
    assert event.kind is interruption.Kind.SCHEDULED_CHANGE
    assert event.instance_ids == ("i-1",)
    assert event.detail == "system-maintenance"
    assert event.action is interruption.Action.CORDON_AND_DRAIN
    assert event.status_category == "EventStatus"  # upstream's category label of the unhealthy-status counter
    for kind, expected in (
        (K.SYSTEM_STATUS, interruption.Kind.SYSTEM_STATUS),
        (K.INSTANCE_STATUS, interruption.Kind.INSTANCE_STATUS),
    ):
        impaired = instancestatus.to_message(F(kind, "i-1", "reachability", event_time=5.0))
        assert (impaired.kind, impaired.instance_ids) == (expected, ("i-1",))
        assert impaired.action is interruption.Action.FORCEFUL_TERMINATION
        assert impaired.status_category == kind.value
        # One id per (instance, check) while it lasts, whatever its details: the poller's dedup key.
        assert impaired.event_id == instancestatus.to_message(F(kind, "i-1", "other", event_time=9.0)).event_id


@pytest.mark.parametrize(
    ("finding", "age", "expected"),
    [
        (F(K.INSTANCE_STATUS, "i-1", "x", event_time=1000.0), instancestatus.UNHEALTHY_THRESHOLD - 1, False),
        (F(K.INSTANCE_STATUS, "i-1", "x", event_time=1000.0), instancestatus.UNHEALTHY_THRESHOLD, True),
        (F(K.SYSTEM_STATUS, "i-1", "x", event_time=None), 0.0, True),  # no ImpairedSince: long impaired
        (F(K.EVENT_STATUS, "i-1", "instance-stop", event_time=1000.0), -3600.0, True),  # events: at once
    ],
)
def test_impaired_checks_wait_for_the_threshold(finding: instancestatus.Finding, age: float, expected: bool) -> None:
    assert instancestatus.due(finding, 1000.0 + age) is expected


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
    client: cloudprovider_parts.QueueClient = poll.poller  # the interruption reconciler's seam
    retiring = _entry("i-1", Events=[_event("instance-retirement")])
    impaired = _entry("i-2", SystemStatus={"Status": "impaired"})
    with poll.stubber:
        poll.answer(retiring, impaired)
        first = await client.receive()
        assert [(r.message.kind, r.message.instance_ids) for r in first] == [
            (interruption.Kind.SCHEDULED_CHANGE, ("i-1",)),
            (interruption.Kind.SYSTEM_STATUS, ("i-2",)),
        ]
        assert poll.poller.impaired == 1
        # Within the minute: waits (at most wait_seconds) and polls nothing.
        poll.clock.step(10)
        assert await client.receive(wait_seconds=20) == []
        assert poll.slept == [20]
        # Not handled: reported again at the next poll, like an undeleted SQS message.
        poll.answer(retiring, impaired)
        again = await client.receive(wait_seconds=60)  # sleeps only until the poll is due
        assert again == first
        assert poll.slept == [20, 30]
        assert poll.poller.impaired == 1  # the same impaired instance is counted once while it lasts
        for received in again:
            await client.delete(received)
        # Handled and still shown: not repeated.
        poll.clock.step(60)
        poll.answer(retiring, impaired)
        assert await client.receive() == []
        # Gone, then back: reported anew.
        poll.clock.step(60)
        poll.answer()
        assert await client.receive() == []
        poll.clock.step(60)
        poll.answer(retiring)
        assert [r.message.detail for r in await client.receive()] == ["instance-retirement"]
        poll.stubber.assert_no_pending_responses()


async def test_a_freshly_impaired_check_is_reported_once_it_lasted_two_minutes() -> None:
    poll = _Poll()
    since = datetime.datetime.fromtimestamp(poll.clock(), tz=datetime.UTC)
    impaired = _entry(
        "i-3",
        InstanceStatus={
            "Status": "impaired",
            "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}],
        },
    )
    with poll.stubber:
        poll.answer(impaired)
        assert await poll.poller.receive() == []  # impaired just now: may be a blip
        assert poll.poller.impaired == 0
        poll.clock.step(60)
        poll.answer(impaired)
        assert await poll.poller.receive() == []
        poll.clock.step(60)
        poll.answer(impaired)
        (received,) = await poll.poller.receive()
        assert received.message.kind is interruption.Kind.INSTANCE_STATUS
        assert received.message.event_time == since.timestamp()
        poll.stubber.assert_no_pending_responses()


async def test_poller_on_the_emulator_sees_healthy_instances_only(ready: Any) -> None:
    aws_provider, _ = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=[]))
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


class _Claims:
    """The interruption loop's ClusterView over fixed claims."""

    def __init__(self, *claims: Any) -> None:
        self.claims = list(claims)

    def synced(self) -> bool:
        return True

    def nodeclaims(self) -> list[Any]:
        return list(self.claims)

    def nodepools(self) -> list[Any]:
        return []


async def test_impaired_and_retiring_instances_on_the_emulator_are_acted_on(
    ready: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto reports every running instance healthy and has no scheduled events: both are injected into its
    in-process EC2 model (the response is still moto's own DescribeInstanceStatus serialization)."""
    aws_provider, _ = ready
    broken = await aws_provider.create(builders.parsed_nodeclaim(name="broken", requirements=[]))
    retiring = await aws_provider.create(builders.parsed_nodeclaim(name="retiring", requirements=[]))
    healthy = await aws_provider.create(builders.parsed_nodeclaim(name="healthy", requirements=[]))
    broken_id, retiring_id = (instances.parse_provider_id(c.status.provider_id) for c in (broken, retiring))
    clock = Clock()
    long_ago = datetime.datetime.fromtimestamp(clock() - 600, tz=datetime.UTC)
    healthy_status = models_instances.Instance.system_status

    def system_status(self: Any) -> dict[str, Any]:
        if self.id == broken_id:
            failed = {"Name": "reachability", "Status": "failed", "ImpairedSince": long_ago}
            return {"Status": "impaired", "Details": [failed]}
        return dict(healthy_status.fget(self))

    def scheduled_events(self: Any) -> list[dict[str, Any]]:
        if self.id == retiring_id:
            return [{"Code": "instance-retirement", "Description": "scheduled", "NotBefore": _NOT_BEFORE}]
        return []

    monkeypatch.setattr(models_instances.Instance, "system_status", property(system_status))
    monkeypatch.setattr(models_instances.Instance, "events", property(scheduled_events), raising=False)

    kube = fake.FakeKubeClient(ManualClock(clock()))
    for claim in (broken, retiring, healthy):
        await kube.create(resources.NODECLAIMS, {"metadata": {"name": claim.name}, "spec": {}})
    patched: list[tuple[str, Any]] = []
    patch = kube.patch

    async def spy_patch(res: resources.Resource, name: str, body: Any, **kwargs: Any) -> Any:
        patched.append((name, body))
        return await patch(res, name, body, **kwargs)

    kube.patch = spy_patch  # type: ignore[method-assign]
    manual = ManualClock(clock())
    poller = instancestatus.InstanceStatusPoller(aws=aws_provider._deps.aws, clock=manual.now, sleep=manual.sleep)
    loop = interruption_controller.InterruptionController(
        interruption_controller.Deps(
            client=kube,
            cluster=_Claims(broken, retiring, healthy),
            queue=poller,
            clock=manual,
            observer=interruption_observer.Observer(events.MemoryRecorder(), interruption_observer.Metrics()),
        )
    )
    handled = await loop.poll()
    assert sorted((h.message.kind.value, h.message.instance_ids) for h in handled) == [
        ("ScheduledChange", (retiring_id,)),
        ("SystemStatus", (broken_id,)),
    ]
    assert all(h.deleted_from_queue for h in handled)
    stamp = decoding.format_timestamp(manual.now())
    assert patched == [
        ("broken", {"metadata": {"annotations": {labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: stamp}}})
    ]
    assert sorted(o["metadata"]["name"] for o in kube.all(resources.NODECLAIMS)) == ["healthy"]
    # Handled findings that EC2 still shows are not acted on again at the next poll.
    manual.advance(instancestatus.POLL_INTERVAL)
    assert await loop.poll() == []
