"""Event recording: the pure Event builder, MemoryRecorder, and KubeRecorder writing through the emulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import polling

from karpy import clock, events
from karpy.kube import credentials, resources, rest
from karpy_emulator.apiserver import runner, server

START = 1_700_000_000.0
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "apps", "uid": "u-pod"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-node", "resourceVersion": "7"}}


@pytest.fixture
async def api() -> AsyncIterator[rest.RestClient]:
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(seed=1)) as kube,
        rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client,
    ):
        yield client


async def _events(api: rest.RestClient) -> list[dict[str, Any]]:
    items, _ = await api.list(resources.EVENTS)
    return sorted(items, key=lambda e: (e["reason"], e["metadata"]["name"]))


def test_build_event_references_the_object_and_uses_default_for_cluster_scoped() -> None:
    body = events.build_event(
        NODE,
        events.EventType.WARNING,
        "Drifted",
        "AMI changed",
        name="n1.1",
        count=3,
        first=START,
        last=START + 61,
        component="karpenter",
    )
    assert body["metadata"] == {"name": "n1.1", "namespace": "default"}
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": "u-node",
        "resourceVersion": "7",
    }
    assert (body["type"], body["reason"], body["message"], body["count"]) == ("Warning", "Drifted", "AMI changed", 3)
    assert (body["firstTimestamp"], body["lastTimestamp"]) == ("2023-11-14T22:13:20Z", "2023-11-14T22:14:21Z")
    assert (
        events.build_event(POD, "Normal", "Nominated", "m", name="x", count=1, first=0, last=0, component="c")[
            "metadata"
        ]["namespace"]
        == "apps"
    )


def test_memory_recorder_keeps_events_in_order() -> None:
    recorder = events.MemoryRecorder()
    recorder.record(POD, "Normal", "Nominated", "Pod should schedule on: nodeclaim/a")
    recorder.record(NODE, "Warning", "FailedDraining", "x")
    assert recorder.reasons() == ["Nominated", "FailedDraining"]
    assert recorder.reasons("n1") == ["FailedDraining"]
    assert recorder.events[0] == events.Recorded(
        "Pod", "apps", "web", "u-pod", "Normal", "Nominated", "Pod should schedule on: nodeclaim/a"
    )


async def test_repeats_bump_the_count_of_one_event(api: rest.RestClient) -> None:
    manual = clock.ManualClock(START)
    recorder = events.KubeRecorder(api, clock=manual)
    recorder.record(POD, "Normal", "Nominated", "on a")
    assert await recorder.flush() == 1
    manual.advance(30)
    recorder.record(POD, "Normal", "Nominated", "on a")
    recorder.record(POD, "Normal", "Nominated", "on a")  # both repeats go out as one count bump
    recorder.record(POD, "Normal", "Nominated", "on b")  # another message is another event
    assert await recorder.flush() == 2
    stored = await _events(api)
    assert [(e["message"], e["count"]) for e in stored] == [("on a", 3), ("on b", 1)]
    assert stored[0]["firstTimestamp"] == "2023-11-14T22:13:20Z"
    assert stored[0]["lastTimestamp"] == "2023-11-14T22:13:50Z"
    assert stored[0]["metadata"]["namespace"] == "apps"
    assert stored[0]["involvedObject"]["uid"] == "u-pod"


async def test_a_hot_loop_is_cut_by_the_per_object_spam_filter(api: rest.RestClient) -> None:
    manual = clock.ManualClock(START)
    recorder = events.KubeRecorder(api, clock=manual, burst=3, refill_seconds=300)
    for i in range(10):
        recorder.record(NODE, "Warning", "Unconsolidatable", f"attempt {i}")
    assert recorder.dropped == 7
    recorder.record(POD, "Normal", "Nominated", "other objects have their own budget")
    await recorder.flush()
    assert len(await _events(api)) == 4
    manual.advance(300)
    recorder.record(NODE, "Warning", "Unconsolidatable", "attempt 10")  # one token came back
    recorder.record(NODE, "Warning", "Unconsolidatable", "attempt 11")
    await recorder.flush()
    assert len(await _events(api)) == 5
    assert recorder.dropped == 8


async def test_an_event_removed_by_the_server_is_created_again(api: rest.RestClient) -> None:
    manual = clock.ManualClock(START)
    recorder = events.KubeRecorder(api, clock=manual)
    recorder.record(NODE, "Normal", "DisruptionBlocked", "budget")
    await recorder.flush()
    (first,) = await _events(api)
    await api.delete(resources.EVENTS, first["metadata"]["name"], namespace="default")
    recorder.record(NODE, "Normal", "DisruptionBlocked", "budget")
    assert await recorder.flush() == 1
    (second,) = await _events(api)
    assert second["count"] == 2
    assert second["metadata"]["name"] != first["metadata"]["name"]


async def test_write_failures_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async with rest.RestClient(credentials.Credentials("http://127.0.0.1:9"), clock=clock.SystemClock()) as dead:
        recorder = events.KubeRecorder(dead, clock=clock.ManualClock(START))
        recorder.record(POD, "Normal", "Nominated", "m")
        assert await recorder.flush() == 0
    assert "could not write event Nominated" in caplog.text


async def test_run_writes_what_record_queues(api: rest.RestClient) -> None:
    recorder = events.KubeRecorder(api, clock=clock.ManualClock(START))
    task = asyncio.create_task(recorder.run())
    recorder.record(POD, "Normal", "Nominated", "m")
    try:
        stored = await polling.until(lambda: _events(api))
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [e["reason"] for e in stored] == ["Nominated"]
    assert recorder.pending == 0


def test_dedupe_follows_upstreams_key_and_timeouts() -> None:
    """core: pkg/events/recorder.go: the key is the reason in lower case and the dedupe values; an event without
    values is never dropped; each event's timeout holds its key, 2 minutes unless it names one."""
    manual = clock.ManualClock(START)
    recorder = events.MemoryRecorder(manual)
    per_node = events.about(NODE)
    assert per_node == events.Dedupe(("Node", "u-node"), events.DEFAULT_DEDUPE_TIMEOUT)
    assert per_node.key("DisruptionBlocked") == "disruptionblocked-Node-u-node"
    recorder.record(NODE, "Normal", "DisruptionBlocked", "first", dedupe=per_node)
    recorder.record(NODE, "Normal", "DisruptionBlocked", "another message, same key", dedupe=per_node)
    recorder.record(NODE, "Normal", "Unconsolidatable", "another reason", dedupe=per_node)
    recorder.record(POD, "Normal", "DisruptionBlocked", "another object", dedupe=events.about(POD))
    recorder.record(NODE, "Normal", "DisruptionBlocked", "no values: never dropped")
    assert [e.message for e in recorder.events] == [
        "first",
        "another reason",
        "another object",
        "no values: never dropped",
    ]
    manual.advance(events.DEFAULT_DEDUPE_TIMEOUT - 1)
    recorder.record(NODE, "Normal", "DisruptionBlocked", "still held", dedupe=per_node)
    manual.advance(1)
    recorder.record(NODE, "Normal", "DisruptionBlocked", "released", dedupe=per_node)
    long = events.about(NODE, "cmd", timeout=900.0)
    recorder.record(NODE, "Normal", "Unconsolidatable", "15 minutes", dedupe=long)
    manual.advance(events.DEFAULT_DEDUPE_TIMEOUT)
    recorder.record(NODE, "Normal", "Unconsolidatable", "held by its own timeout", dedupe=long)
    assert [e.message for e in recorder.events][-2:] == ["released", "15 minutes"]


def test_a_namespaced_object_without_a_uid_is_deduplicated_by_its_name() -> None:
    unsaved = {"kind": "Pod", "metadata": {"name": "web", "namespace": "apps"}}
    assert events.about(unsaved, "x").values == ("Pod", "apps/web", "x")


async def test_the_kube_recorder_drops_what_it_took_within_the_timeout(api: rest.RestClient) -> None:
    manual = clock.ManualClock(START)
    recorder = events.KubeRecorder(api, clock=manual)
    for _ in range(3):
        recorder.record(POD, "Warning", "FailedScheduling", "no fit", dedupe=events.about(POD))
    await recorder.flush()
    (event,) = await _events(api)
    assert event["count"] == 1
    manual.advance(events.DEFAULT_DEDUPE_TIMEOUT)
    recorder.record(POD, "Warning", "FailedScheduling", "no fit", dedupe=events.about(POD))
    await recorder.flush()
    (event,) = await _events(api)
    assert event["count"] == 2
