"""End to end on emulators: EventBridge put_events → rule → SQS (moto server) → the real AWS queue client →
the interruption controller → NodeClaim deleted in the emulated API server, offering marked in the AWS ICE cache."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import boto3
import pytest
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import REGION

from karpy import clock, events
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import cache, clients, interruption_queue
from karpy.interruption import controller, observer
from karpy.kube import client, credentials, resources, rest
from karpy.state import cluster
from karpy_emulator.apiserver import runner, server
from karpy_emulator.aws import seeding

R = resources
INSTANCE = "i-0123456789abcdef0"


@pytest.fixture
async def api() -> AsyncIterator[rest.RestClient]:
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(seed=11)) as kube,
        rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as served,
    ):
        yield served


CLAIM_LABELS = {
    "node.kubernetes.io/instance-type": "m5.large",
    "topology.kubernetes.io/zone": "us-east-1a",
    "karpenter.sh/capacity-type": "spot",
}


async def _state_of(api: rest.RestClient) -> cluster.Cluster:
    created = await api.create(R.NODECLAIMS, builders.nodeclaim("default-abcde", labels=CLAIM_LABELS))
    created["status"] = {"providerID": f"aws:///us-east-1a/{INSTANCE}", "nodeName": "ip-10-0-0-1.ec2.internal"}
    await api.patch(R.NODECLAIMS, created["metadata"]["name"], {"status": created["status"]}, subresource="status")
    state = cluster.Cluster(clock=clock.SystemClock())
    for res in (R.NODECLAIMS, R.NODEPOOLS):
        items, _ = await api.list(res)
        for item in items:
            state.apply(res, client.WatchEvent(client.ADDED, item))
        state.mark_listed(res)
    return state


def _controller(
    api: rest.RestClient,
    state: cluster.Cluster,
    sqs: interruption_queue.InterruptionQueue,
    *,
    recorder: events.Recorder,
    metrics: observer.Metrics,
    offerings: cloudprovider_parts.OfferingMarker | None = None,
) -> controller.InterruptionController:
    typed_queue: cloudprovider_parts.QueueClient = sqs  # the AWS client satisfies the protocol structurally
    deps = controller.Deps(
        client=api,
        cluster=state,
        queue=typed_queue,
        clock=clock.SystemClock(),
        observer=observer.Observer(recorder, metrics),
        offerings=offerings,
    )
    return controller.InterruptionController(deps)


async def test_spot_warning_deletes_the_nodeclaim(
    seeded: seeding.Seeded, aws: clients.Clients, api: rest.RestClient
) -> None:
    state = await _state_of(api)
    assert [c.status.provider_id for c in state.nodeclaims()] == [f"aws:///us-east-1a/{INSTANCE}"]

    seeding.put_event(
        region=REGION,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
        detail={"instance-id": INSTANCE, "instance-action": "terminate"},
    )
    sqs = interruption_queue.InterruptionQueue(aws=aws, queue_name=seeded.queue_name)
    ice = cache.UnavailableOfferings(clock=lambda: 1_700_000_000.0)
    recorder = events.MemoryRecorder()
    typed_marker: cloudprovider_parts.OfferingMarker = ice
    ctl = _controller(api, state, sqs, recorder=recorder, metrics=observer.Metrics(), offerings=typed_marker)
    handled = await ctl.poll()
    assert [h.message.kind.value for h in handled] == ["SpotInterruption"]
    assert handled[0].deleted_from_queue
    assert await api.get(R.NODECLAIMS, "default-abcde") is None
    assert ice.is_unavailable("m5.large", "us-east-1a", "spot")
    assert recorder.reasons("default-abcde") == ["SpotInterrupted", "TerminatingOnInterruption"]
    assert recorder.reasons("ip-10-0-0-1.ec2.internal") == ["SpotInterrupted", "TerminatingOnInterruption"]
    assert await sqs.receive(wait_seconds=0) == []  # the message was deleted after handling


POISON_BODIES = (
    '{"source": "aws.health", "detail-type": "AWS Health Event", "detail": {"affectedEntities": 5}}',
    "[" * 120_000 + "]" * 120_000,
    '{"id": ' + "9" * 5000 + "}",
    "not json at all",
)


async def test_poison_beside_a_spot_warning_is_dropped_in_the_same_pass(
    seeded: seeding.Seeded, aws: clients.Clients, api: rest.RestClient
) -> None:
    state = await _state_of(api)
    boto = boto3.client("sqs", region_name=REGION)
    for body in POISON_BODIES[:2]:
        boto.send_message(QueueUrl=seeded.queue_url, MessageBody=body)
    seeding.put_event(
        region=REGION,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
        detail={"instance-id": INSTANCE, "instance-action": "terminate"},
    )
    for body in POISON_BODIES[2:]:
        boto.send_message(QueueUrl=seeded.queue_url, MessageBody=body)
    sqs = interruption_queue.InterruptionQueue(aws=aws, queue_name=seeded.queue_name)
    dropped: list[str] = []
    ctl = _controller(api, state, sqs, recorder=events.MemoryRecorder(), metrics=_Dropped(dropped))
    handled = await ctl.poll()  # one receive: all five messages (SQS hands out up to 10)
    assert [h.message.kind.value for h in handled] == ["SpotInterruption"]
    assert handled[0].deleted_from_queue
    assert await api.get(R.NODECLAIMS, "default-abcde") is None
    assert sorted(dropped) == ["malformed", "not_json", "not_json", "not_json"]
    attrs = boto.get_queue_attributes(
        QueueUrl=seeded.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}


class _Dropped(observer.Metrics):
    """Collects the reasons of the messages the poller dropped."""

    def __init__(self, into: list[str]) -> None:
        self._into = into

    def dropped(self, reason: str) -> None:
        self._into.append(reason)


class _Down(rest.RestClient):
    """The API server is unreachable for deletes."""

    async def delete(self, *args: Any, **kwargs: Any) -> bool:
        raise OSError("connection refused")


class _Recording(interruption_queue.InterruptionQueue):
    """The real queue client, remembering the receipt handles it handed out."""

    handles: list[str] = []

    async def receive(self, *, wait_seconds: int = 20) -> Sequence[interruption.Received | interruption.Unreadable]:
        got = await super().receive(wait_seconds=wait_seconds)
        self.handles = [item.receipt_handle for item in got]
        return got


async def test_a_message_that_keeps_failing_is_dropped_at_the_receive_limit(
    seeded: seeding.Seeded, aws: clients.Clients, api: rest.RestClient
) -> None:
    state = await _state_of(api)
    seeding.put_event(
        region=REGION,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
        detail={"instance-id": INSTANCE, "instance-action": "terminate"},
    )
    boto = boto3.client("sqs", region_name=REGION)
    sqs = _Recording(aws=aws, queue_name=seeded.queue_name)
    dropped: list[str] = []
    async with _Down(api.credentials, clock=clock.SystemClock()) as down:
        metrics = _Dropped(dropped)
        ctl = _controller(down, state, sqs, recorder=events.MemoryRecorder(), metrics=metrics)
        for receive in range(1, controller.MAX_RECEIVES + 1):
            (handled,) = await ctl.poll()
            assert handled.deleted_from_queue == (receive == controller.MAX_RECEIVES)
            if not handled.deleted_from_queue:  # back on the queue now, not after the 20 s visibility timeout
                (handle,) = sqs.handles
                boto.change_message_visibility(QueueUrl=seeded.queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert dropped == ["retries_exhausted"]
    assert await sqs.receive(wait_seconds=0) == []
