"""The interruption loop with an in-memory queue, the memory KubeClient and virtual time."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests import builders, tasks
from tests.nodeclaim import builders as nodeclaim_builders

from karpy import events
from karpy.api import labels
from karpy.clock import ManualClock
from karpy.cloudprovider import interruption
from karpy.interruption import controller, handler, observer
from karpy.kube import client, fake, resources
from karpy.state import cluster as state_cluster

K = interruption.Kind


class Queue:
    """A `QueueClient`: hands out what tests put in, 10 at a time; an empty receive long-polls on the clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.waiting: list[interruption.Received | interruption.Unreadable] = []
        self.deleted: list[str] = []
        self.fail_receives = 0
        self.fail_deletes: set[str] = set()
        self._handles = 0

    def put(self, kind: interruption.Kind, *instances: str, receive_count: int = 1) -> interruption.Received:
        self._handles += 1
        message = interruption.Message(kind, instances, event_id=f"e{self._handles}")
        item = interruption.Received(message, f"rh-{self._handles}", receive_count=receive_count)
        self.waiting.append(item)
        return item

    def put_unreadable(self, reason: interruption.DropReason) -> interruption.Unreadable:
        self._handles += 1
        item = interruption.Unreadable(f"rh-{self._handles}", reason, "what was wrong", f"m{self._handles}")
        self.waiting.append(item)
        return item

    async def receive(self, *, wait_seconds: int = 20) -> list[interruption.Received | interruption.Unreadable]:
        if self.fail_receives:
            self.fail_receives -= 1
            raise OSError("connection reset")
        if not self.waiting:
            await self.clock.sleep(wait_seconds)
            return []
        batch, self.waiting = self.waiting[:10], self.waiting[10:]
        return batch

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        if received.receipt_handle in self.fail_deletes:
            raise OSError("connection reset")
        self.deleted.append(received.receipt_handle)


@dataclass
class Marker:
    marked: list[tuple[str, str, str]] = field(default_factory=list)

    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        self.marked.append((instance_type, zone, capacity_type))


class Counts(observer.Metrics):
    """The poller's metrics as calls, in order: the same named methods the operator binds to its series."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def received(self, kind: str) -> None:
        self.calls.append(("received", (kind,)))

    def deleted(self, kind: str) -> None:
        self.calls.append(("deleted", (kind,)))

    def dropped(self, reason: str) -> None:
        self.calls.append(("dropped", (reason,)))

    def action(self, action: str, kind: str) -> None:
        self.calls.append(("action", (action, kind)))

    def failed(self, kind: str) -> None:
        self.calls.append(("failed", (kind,)))

    def disrupted(self, kind: str, nodepool: str, capacity_type: str) -> None:
        self.calls.append(("disrupted", (kind, nodepool, capacity_type)))

    def of(self, name: str) -> list[tuple[Any, ...]]:
        return [args for n, args in self.calls if n == name]


C5_SPOT = {labels.LABEL_INSTANCE_TYPE: "c5.xlarge", labels.LABEL_ZONE: "us-east-1b", labels.LABEL_CAPACITY_TYPE: "spot"}


def running_claim(name: str, instance: str, *, node: str = "", pool: str = "default", **fields: Any) -> dict[str, Any]:
    """A spot NodeClaim of `pool` on EC2 instance `instance`, registered as `node` if given (`fields`: as
    `builders.nodeclaim`'s)."""
    provider_id = f"aws:///us-east-1b/{instance}"
    fields.setdefault("uid", f"uid-{name}")
    return builders.nodeclaim(name, pool=pool, labels=C5_SPOT, provider_id=provider_id, node_name=node, **fields)


def _seen(state: state_cluster.Cluster, res: resources.Resource, *objs: dict[str, Any]) -> None:
    """What the informer of `res` delivers to the state cache."""
    for obj in objs:
        state.apply(res, client.WatchEvent(client.ADDED, obj))


@dataclass
class Env:
    clock: ManualClock
    queue: Queue
    kube: fake.FakeKubeClient
    recorder: events.MemoryRecorder
    marker: Marker
    counts: Counts
    cluster: state_cluster.Cluster
    ctl: controller.InterruptionController


async def _env(*claims: dict[str, Any], pools: list[dict[str, Any]] | None = None, synced: bool = True) -> Env:
    clock = ManualClock(0.0)
    queue, kube, recorder, marker, counts = (
        Queue(clock),
        fake.FakeKubeClient(clock),
        events.MemoryRecorder(),
        Marker(),
        Counts(),
    )
    for c in claims:
        await kube.create(resources.NODECLAIMS, {"metadata": {"name": c["metadata"]["name"]}, "spec": {}})
    cluster = state_cluster.Cluster(clock=clock, expected=(resources.NODECLAIMS, resources.NODEPOOLS))
    cluster.mark_listed(resources.NODEPOOLS)
    if synced:
        cluster.mark_listed(resources.NODECLAIMS)
    _seen(cluster, resources.NODEPOOLS, *(pools or [builders.nodepool("default", requirements=[])]))
    _seen(cluster, resources.NODECLAIMS, *claims)
    deps = controller.Deps(
        client=kube,
        cluster=cluster,
        queue=queue,
        clock=clock,
        observer=observer.Observer(recorder, counts),
        offerings=marker,
    )
    return Env(clock, queue, kube, recorder, marker, counts, cluster, controller.InterruptionController(deps))


def _on(env: Env, kube: client.KubeClient) -> controller.InterruptionController:
    """A controller like `env.ctl`, talking to another API client."""
    deps = controller.Deps(
        client=kube,
        cluster=env.cluster,
        queue=env.queue,
        clock=env.clock,
        observer=observer.Observer(env.recorder, env.counts),
    )
    return controller.InterruptionController(deps)


def _names(kube: fake.FakeKubeClient) -> set[str]:
    return {o["metadata"]["name"] for o in kube.all(resources.NODECLAIMS)}


async def test_spot_interruption_drains_marks_and_deletes_the_message() -> None:
    env = await _env(running_claim("a", "i-a", node="ip-1"), running_claim("b", "i-b", node="ip-2"))
    item = env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    (handled,) = await env.ctl.poll()
    assert handled.deleted_from_queue
    assert _names(env.kube) == {"b"}
    assert env.marker.marked == [("c5.xlarge", "us-east-1b", "spot")]
    assert env.queue.deleted == [item.receipt_handle]
    assert [(e.kind, e.name, e.reason) for e in env.recorder.events] == [
        ("NodeClaim", "a", "SpotInterrupted"),
        ("Node", "ip-1", "SpotInterrupted"),
        ("NodeClaim", "a", "TerminatingOnInterruption"),
        ("Node", "ip-1", "TerminatingOnInterruption"),
    ]
    assert env.recorder.events[2].message == "Interruption triggered termination for the NodeClaim"
    assert env.recorder.events[0].uid == "uid-a"
    assert env.counts.of("received") == [("SpotInterruption",)]
    assert env.counts.of("action") == [("CordonAndDrain", "SpotInterruption")]
    assert env.counts.of("deleted") == [("SpotInterruption",)]
    assert env.counts.of("disrupted") == [("SpotInterruption", "default", "spot")]


async def test_delete_is_logged_with_upstream_message_and_fields(caplog: pytest.LogCaptureFixture) -> None:
    env = await _env(running_claim("a", "i-a", node="ip-1"))
    env.queue.put(K.SCHEDULED_CHANGE, "i-a")
    with caplog.at_level(logging.INFO, logger=controller.__name__):
        await env.ctl.poll()
    (record,) = [r for r in caplog.records if r.getMessage() == "initiating delete from interruption message"]
    assert (record.messageKind, record.action, record.nodeclaim, record.node) == (
        "ScheduledChange",
        "CordonAndDrain",
        "a",
        "ip-1",
    )


async def test_a_claim_already_gone_is_neither_logged_nor_counted(caplog: pytest.LogCaptureFixture) -> None:
    env = await _env(running_claim("a", "i-a"))
    await env.kube.delete(resources.NODECLAIMS, "a")  # deleted by someone else after the cache was read
    env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    with caplog.at_level(logging.INFO, logger=controller.__name__):
        (handled,) = await env.ctl.poll()
    assert handled.deleted_from_queue
    assert env.counts.of("disrupted") == []
    assert "initiating delete from interruption message" not in [r.getMessage() for r in caplog.records]


async def test_rebalance_is_an_event_unless_the_pool_opts_in() -> None:
    replace = builders.nodepool(
        "replace", annotations={labels.ANNOTATION_REPLACE_ON_REBALANCE: "true"}, requirements=[]
    )
    env = await _env(
        running_claim("a", "i-a", node="ip-1"),
        running_claim("r", "i-r", node="ip-2", pool="replace"),
        pools=[builders.nodepool("default", requirements=[]), replace],
    )
    env.queue.put(K.REBALANCE_RECOMMENDATION, "i-a")
    env.queue.put(K.REBALANCE_RECOMMENDATION, "i-r")
    handled = await env.ctl.poll()
    assert all(h.deleted_from_queue for h in handled)
    assert _names(env.kube) == {"a"}  # only the opted-in pool's NodeClaim was replaced
    assert env.recorder.reasons("a") == ["SpotRebalanceRecommendation"]
    assert env.recorder.reasons("r") == ["SpotRebalanceRecommendation", "TerminatingOnInterruption"]
    assert sorted(env.counts.of("action")) == [
        ("CordonAndDrain", "RebalanceRecommendation"),
        ("NoAction", "RebalanceRecommendation"),
    ]
    assert env.marker.marked == []


async def test_unknown_instance_message_is_deleted_without_action() -> None:
    env = await _env(running_claim("a", "i-a"))
    env.queue.put(K.INSTANCE_TERMINATED, "i-somebody-else")
    (handled,) = await env.ctl.poll()
    assert handled.decisions == ()
    assert handled.deleted_from_queue
    assert _names(env.kube) == {"a"}
    assert env.recorder.events == []


class RefusingClient(fake.FakeKubeClient):
    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        raise client.KubeError(503, "ServiceUnavailable", "etcd leader changed")


async def test_failed_action_leaves_the_message_for_a_retry() -> None:
    env = await _env(running_claim("a", "i-a"))
    refusing = RefusingClient(env.clock)
    ctl = _on(env, refusing)
    env.queue.put(K.INSTANCE_STOPPED, "i-a")
    (handled,) = await ctl.poll()
    assert not handled.deleted_from_queue
    assert env.queue.deleted == []
    assert env.counts.of("failed") == [("InstanceStopped",)]


async def test_failed_action_is_dropped_once_the_message_was_received_max_times() -> None:
    env = await _env(running_claim("a", "i-a"))
    refusing = RefusingClient(env.clock)
    ctl = _on(env, refusing)
    env.queue.put(K.INSTANCE_STOPPED, "i-a", receive_count=controller.MAX_RECEIVES - 1)
    last = env.queue.put(K.INSTANCE_STOPPED, "i-a", receive_count=controller.MAX_RECEIVES)
    kept, dropped = await ctl.poll()
    assert not kept.deleted_from_queue
    assert dropped.deleted_from_queue
    assert env.queue.deleted == [last.receipt_handle]
    assert env.counts.of("dropped") == [("retries_exhausted",)]
    assert env.counts.of("deleted") == []


async def test_poison_is_dropped_in_the_same_pass_as_the_spot_warning_beside_it() -> None:
    env = await _env(running_claim("a", "i-a", node="ip-1"))
    poison = [
        env.queue.put_unreadable(reason)
        for reason in (interruption.DropReason.NOT_JSON, interruption.DropReason.MALFORMED)
    ]
    warning = env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    (handled,) = await env.ctl.poll()
    assert handled.message == warning.message
    assert handled.deleted_from_queue
    assert _names(env.kube) == set(), "the spot warning was acted on"
    assert env.queue.deleted == [p.receipt_handle for p in poison] + [warning.receipt_handle]
    assert env.counts.of("dropped") == [("not_json",), ("malformed",)]
    assert env.counts.of("received") == [("SpotInterruption",)]


class BuggyClient(fake.FakeKubeClient):
    """The API answers in a shape the controller does not expect (a karpy bug as far as the loop can tell)."""

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        raise KeyError("metadata")


async def test_a_message_whose_handling_raises_is_dropped_and_its_batch_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = await _env(running_claim("a", "i-a"), running_claim("b", "i-b"))
    buggy = BuggyClient(env.clock)
    await buggy.create(resources.NODECLAIMS, {"metadata": {"name": "b"}, "spec": {}})
    ctl = _on(env, buggy)
    bad = env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    fine = env.queue.put(K.REBALANCE_RECOMMENDATION, "i-b")  # an event only: no delete call
    with caplog.at_level(logging.ERROR, logger=controller.__name__):
        handled = await ctl.poll()
    assert [h.deleted_from_queue for h in handled] == [True, True]
    assert env.queue.deleted == [bad.receipt_handle, fine.receipt_handle]
    assert env.counts.of("dropped") == [("internal_error",)]
    assert env.counts.of("deleted") == [("RebalanceRecommendation",)]
    (record,) = [r for r in caplog.records if r.getMessage() == "handling interruption message raised, dropping it"]
    assert record.exc_info is not None


async def test_a_failed_queue_delete_does_not_stop_the_batch() -> None:
    env = await _env(running_claim("a", "i-a"), running_claim("b", "i-b"))
    first = env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    second = env.queue.put(K.SPOT_INTERRUPTION, "i-b")
    env.queue.fail_deletes.add(first.receipt_handle)
    handled = await env.ctl.poll()
    assert [h.deleted_from_queue for h in handled] == [False, True]
    assert _names(env.kube) == set(), "both were acted on; the first message comes back and finds nothing to do"
    assert env.queue.deleted == [second.receipt_handle]


class SlowClient(fake.FakeKubeClient):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.active = 0
        self.peak = 0
        self.release = asyncio.Event()

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await self.release.wait()
        self.active -= 1
        return await super().delete(res, name)


async def test_at_most_ten_messages_in_flight() -> None:
    claims = [running_claim(f"c{i}", f"i-{i}") for i in range(12)]
    env = await _env(*claims)
    slow = SlowClient(env.clock)
    for c in claims:
        await slow.create(resources.NODECLAIMS, {"metadata": {"name": c["metadata"]["name"]}, "spec": {}})
    ctl = _on(env, slow)
    for i in range(12):
        env.queue.put(K.SPOT_INTERRUPTION, f"i-{i}")
    env.queue.receive = _all_at_once(env.queue.waiting)  # type: ignore[method-assign]  # one batch of 12
    task = asyncio.ensure_future(ctl.poll())
    await env.clock.settle()
    assert slow.peak == controller.MAX_CONCURRENT_MESSAGES
    slow.release.set()
    handled = await task
    assert len(handled) == 12
    assert _names(slow) == set()


def _all_at_once(items: list[interruption.Received | interruption.Unreadable]) -> Any:
    async def receive(*, wait_seconds: int = 20) -> list[interruption.Received | interruption.Unreadable]:
        return list(items)

    return receive


async def test_run_waits_for_sync_and_survives_queue_errors() -> None:
    env = await _env(running_claim("a", "i-a"), synced=False)
    env.queue.fail_receives = 1
    env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    async with tasks.running(env.ctl.run):
        await env.clock.run_for(3.0)
        assert _names(env.kube) == {"a"}  # not synced: not polled yet
        assert env.queue.fail_receives == 1  # no receive at all: an empty cache would know no instance
        env.cluster.mark_listed(resources.NODECLAIMS)
        await env.clock.run_for(1.0)  # synced: the first receive fails, the loop backs off
        assert _names(env.kube) == {"a"}
        await env.clock.run_for(controller.ERROR_BACKOFF)
        assert _names(env.kube) == set()
        assert env.queue.deleted == ["rh-1"]


async def test_a_failed_status_check_sets_the_termination_time_to_now_then_deletes() -> None:
    already = running_claim(
        "b", "i-b", annotations={labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: "2030-01-01T00:00:00Z"}
    )
    env = await _env(running_claim("a", "i-a", node="ip-1"), already)
    env.clock.advance(90.0)
    writes: list[tuple[str, str, Any]] = []
    patch, delete = env.kube.patch, env.kube.delete

    async def spy_patch(res: resources.Resource, name: str, body: Any, **kwargs: Any) -> Any:
        writes.append(("patch", name, body))
        return await patch(res, name, body, **kwargs)

    async def spy_delete(res: resources.Resource, name: str, **kwargs: Any) -> bool:
        writes.append(("delete", name, None))
        return await delete(res, name, **kwargs)

    env.kube.patch, env.kube.delete = spy_patch, spy_delete  # type: ignore[method-assign]
    env.queue.put(K.SYSTEM_STATUS, "i-a")
    env.queue.put(K.INSTANCE_STATUS, "i-b")
    await env.ctl.poll()
    stamp = {"metadata": {"annotations": {labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: "1970-01-01T00:01:30Z"}}}
    # Annotated first (the Node finalizer then skips the graceful drain), deleted second; a claim whose
    # termination time is already set keeps it.
    assert writes == [("patch", "a", stamp), ("delete", "a", None), ("delete", "b", None)]
    assert ("NodeClaim", "a", "InstanceUnhealthy") in [(e.kind, e.name, e.reason) for e in env.recorder.events]
    assert env.counts.of("action") == [
        ("ForcefulTermination", "SystemStatus"),
        ("ForcefulTermination", "InstanceStatus"),
    ]
    assert env.counts.of("disrupted") == [("SystemStatus", "default", "spot"), ("InstanceStatus", "default", "spot")]


async def test_events_name_the_nodeclaim_and_its_node_by_api_version_kind_and_uid() -> None:
    env = await _env(running_claim("a", "i-a", node="ip-1"))
    _seen(env.cluster, resources.NODECLAIMS, running_claim("b", "i-b", uid=""))
    recorder = env.recorder
    env.queue.put(K.INSTANCE_STOPPED, "i-a")
    env.queue.put(K.REBALANCE_RECOMMENDATION, "i-b")
    await env.ctl.poll()
    claim_a = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "a", "uid": "uid-a"}
    node = {"apiVersion": "v1", "kind": "Node", "name": "ip-1", "uid": ""}
    claim_b = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "b", "uid": ""}
    assert [events.involved_object(ref) for ref in recorder.refs] == [claim_a, node, claim_a, node, claim_b]
    assert [(e.type, e.reason, e.message) for e in recorder.events] == [
        ("Warning", "InstanceStopping", "Instance is stopping"),
        ("Warning", "InstanceStopping", "Instance is stopping"),
        ("Warning", "TerminatingOnInterruption", "Interruption triggered termination for the NodeClaim"),
        ("Warning", "TerminatingOnInterruption", "Interruption triggered termination for the Node"),
        ("Normal", "SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered"),
    ]


async def test_a_failed_action_still_reports_the_message_and_its_decisions() -> None:
    env = await _env(running_claim("a", "i-a"))
    ctl = _on(env, RefusingClient(env.clock))
    item = env.queue.put(K.INSTANCE_STOPPED, "i-a")
    (handled,) = await ctl.poll()
    assert handled.message == item.message
    assert [d.target.nodeclaim for d in handled.decisions] == ["a"]
    assert handled.deleted_from_queue is False


async def test_a_message_redelivered_after_its_failed_delete_is_acted_on_once() -> None:
    """SQS gives a message back when its deletion failed (after the visibility timeout, with a new receipt handle):
    redelivered while the NodeClaim is still deleting, and again once it is gone, it neither deletes the claim again
    nor says again that it did (core's TerminatingOnInterruption; the warning itself is reported per delivery, as
    upstream's handler publishes it for every message it handles)."""
    claim = running_claim("a", "i-a", node="n-a")
    env = await _env(claim)
    await env.kube.patch(resources.NODECLAIMS, "a", {"metadata": {"finalizers": [labels.FINALIZER_TERMINATION]}})
    first = env.queue.put(K.SPOT_INTERRUPTION, "i-a")
    env.queue.fail_deletes.add(first.receipt_handle)

    def deletes() -> int:
        return sum(1 for w in env.kube.writes if w.verb == "delete" and w.plural == resources.NODECLAIMS.plural)

    def terminating() -> int:
        return env.recorder.reasons().count(handler.Reason.TERMINATING_ON_INTERRUPTION)

    (handled,) = await env.ctl.poll()
    assert not handled.deleted_from_queue
    assert (deletes(), terminating()) == (1, 2)  # the NodeClaim and its Node
    deleting = env.kube.obj(resources.NODECLAIMS, "a")
    assert deleting is not None
    assert deleting["metadata"].get("deletionTimestamp")
    # The state cache sees it deleting, as its informer would.
    seen_deleting = running_claim("a", "i-a", node="n-a", deleted=nodeclaim_builders.ts(env.clock.now()))
    env.cluster.apply(resources.NODECLAIMS, client.WatchEvent(client.MODIFIED, seen_deleting))

    env.queue.put(K.SPOT_INTERRUPTION, "i-a", receive_count=2)  # still deleting: its finalizer holds it
    (again,) = await env.ctl.poll()
    assert again.deleted_from_queue
    assert [d.delete for d in again.decisions] == [False]
    assert (deletes(), terminating()) == (1, 2)

    await env.kube.patch(resources.NODECLAIMS, "a", {"metadata": {"finalizers": []}})
    assert env.kube.obj(resources.NODECLAIMS, "a") is None
    env.cluster.apply(resources.NODECLAIMS, client.WatchEvent(client.DELETED, seen_deleting))
    env.queue.put(K.SPOT_INTERRUPTION, "i-a", receive_count=3)  # gone
    (last,) = await env.ctl.poll()
    assert last.deleted_from_queue
    assert last.decisions == ()
    assert (deletes(), terminating()) == (1, 2)
    assert (
        env.recorder.reasons().count(handler.Reason.SPOT_INTERRUPTED) == 4
    )  # the warning, once per delivery that found the claim


def test_a_notice_is_told_once_per_object_within_the_dedupe_timeout() -> None:
    """Upstream's interruption Events carry the NodeClaim's or Node's UID as their dedupe value (aws:
    pkg/controllers/interruption/events/events.go): a warning delivered twice within the recorder's 2 minutes is
    told once on each object; another claim's, and the same one's after the timeout, are told again."""
    clock = ManualClock(0.0)
    recorder = events.MemoryRecorder(clock)
    told = observer.Observer(recorder, Counts())
    warning = handler.Notice("Warning", handler.Reason.SPOT_INTERRUPTED, "Spot interruption warning was triggered")
    a = handler.Target("a", uid="uid-a", node="ip-1")
    told.noticed(a, warning)
    told.noticed(a, warning)
    told.noticed(handler.Target("b", uid="uid-b", node="ip-2"), warning)
    clock.advance(events.DEFAULT_DEDUPE_TIMEOUT)
    told.noticed(a, warning)
    assert [(e.kind, e.name) for e in recorder.events] == [
        ("NodeClaim", "a"),
        ("Node", "ip-1"),
        ("NodeClaim", "b"),
        ("Node", "ip-2"),
        ("NodeClaim", "a"),
        ("Node", "ip-1"),
    ]
