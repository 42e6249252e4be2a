"""End to end on emulators: EventBridge put_events → rule → SQS (moto server) → the real AWS queue client →
the interruption controller → NodeClaim deleted in the emulated API server, offering marked in the AWS ICE cache."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import REGION

from karpy import clock, events
from karpy.cloudprovider.aws import cache, clients, emulator, interruption
from karpy.interruption import controller, queue
from karpy.kube import client, config, resources, rest
from karpy.sim.kube import runner, server
from karpy.state import cluster

R = resources
INSTANCE = "i-0123456789abcdef0"


@pytest.fixture
async def api() -> AsyncIterator[rest.RestClient]:
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(seed=11)) as kube,
        rest.RestClient(config.Config(server=kube.url), clock=clock.SystemClock()) as served,
    ):
        yield served


def _claim() -> dict[str, Any]:
    body = builders.nodeclaim("default-abcde")
    body["metadata"]["labels"].update(
        {
            "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-east-1a",
            "karpenter.sh/capacity-type": "spot",
        }
    )
    return body


async def test_spot_warning_deletes_the_nodeclaim(
    seeded: emulator.Seeded, aws: clients.Clients, api: rest.RestClient
) -> None:
    created = await api.create(R.NODECLAIMS, _claim())
    created["status"] = {"providerID": f"aws:///us-east-1a/{INSTANCE}", "nodeName": "ip-10-0-0-1.ec2.internal"}
    await api.patch(R.NODECLAIMS, created["metadata"]["name"], {"status": created["status"]}, subresource="status")
    state = cluster.Cluster(clock=clock.SystemClock())
    for res in (R.NODECLAIMS, R.NODEPOOLS):
        items, _ = await api.list(res)
        for item in items:
            state.apply(res, client.WatchEvent(client.ADDED, item))
        state.mark_listed(res)
    assert [c.status.provider_id for c in state.nodeclaims()] == [f"aws:///us-east-1a/{INSTANCE}"]

    emulator.put_event(
        region=REGION,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
        detail={"instance-id": INSTANCE, "instance-action": "terminate"},
    )
    sqs = interruption.InterruptionQueue(aws=aws, queue_name=seeded.queue_name)
    ice = cache.UnavailableOfferings(clock=lambda: 1_700_000_000.0)
    recorder = events.MemoryRecorder()
    typed_queue: queue.QueueClient = sqs  # the AWS client satisfies the protocol structurally
    typed_marker: queue.OfferingMarker = ice
    ctl = controller.InterruptionController(
        controller.Deps(
            client=api,
            cluster=state,
            queue=typed_queue,
            clock=clock.SystemClock(),
            recorder=recorder,
            offerings=typed_marker,
        )
    )
    handled = await ctl.poll()
    assert [h.message.kind.value for h in handled] == ["SpotInterruption"]
    assert handled[0].deleted_from_queue
    assert await api.get(R.NODECLAIMS, "default-abcde") is None
    assert ice.is_unavailable("m5.large", "us-east-1a", "spot")
    assert recorder.reasons("default-abcde") == ["SpotInterrupted", "TerminatingOnInterruption"]
    assert recorder.reasons("ip-10-0-0-1.ec2.internal") == ["SpotInterrupted", "TerminatingOnInterruption"]
    assert await sqs.receive(wait_seconds=0) == []  # the message was deleted after handling
