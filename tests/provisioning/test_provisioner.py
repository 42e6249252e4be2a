"""The provisioning loop against in-memory state, a memory client, the fake cloud provider and virtual time."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from tests import builders, logtext, polling, tasks
from tests.provisioning import builders as provisioning_builders
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections
from karpy.api import labels, nodepool, quantity
from karpy.clock import ManualClock
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client as kube_client
from karpy.kube import fake as kube_fake
from karpy.kube import resources
from karpy.provisioning import provisioner, snapshot
from karpy.scheduling import pods, results, scheduler
from karpy.state import cluster as state_cluster


class Counters(provisioner.Metrics):
    """The provisioner's counts, kept."""

    def __init__(self) -> None:
        self.created: list[tuple[str, bool]] = []
        self.failed: list[tuple[str, str]] = []
        self.durations: list[float] = []
        self.unschedulable: list[int] = []

    def scheduling_duration(self, seconds: float) -> None:
        self.durations.append(seconds)

    def nodeclaim_created(self, pool: str, min_values_relaxed: bool) -> None:
        self.created.append((pool, min_values_relaxed))

    def nodeclaim_create_failed(self, pool: str, reason: str) -> None:
        self.failed.append((pool, reason))

    def pods_unschedulable(self, count: int) -> None:
        self.unschedulable.append(count)


@dataclass
class Env:
    cluster: state_cluster.Cluster
    client: kube_fake.FakeKubeClient
    recorder: events.MemoryRecorder
    clock: ManualClock
    counters: Counters
    prov: provisioner.Provisioner


def _env(
    *,
    cloud: types.CloudProvider | None = None,
    pools: Sequence[dict[str, Any]] = (),
    pending: Sequence[dict[str, Any]] = (),
    nodes: Sequence[dict[str, Any]] = (),
    claims: Sequence[dict[str, Any]] = (),
    pods: Sequence[dict[str, Any]] = (),
    synced: bool = True,
    **deps: object,
) -> Env:
    clock = ManualClock(0.0)
    cluster = provisioning_builders.state(
        clock, pools=pools, pending=pending, nodes=nodes, claims=claims, pods=pods, synced=synced
    )
    client, recorder, counters = kube_fake.FakeKubeClient(clock), events.MemoryRecorder(clock), Counters()
    d = provisioner.Deps(
        client=client,
        cluster=cluster,
        cloud=cloud or fake_provider.FakeCloudProvider(fake_catalog(8)),
        clock=clock,
        recorder=recorder,
        rejections=rejections.Discard(),
        metrics=counters,
        **deps,  # type: ignore[arg-type]
    )
    return Env(cluster, client, recorder, clock, counters, provisioner.Provisioner(d))


DEFAULT_POOL = builders.nodepool("default", requirements=[])
NODE_A = builders.node(
    "node-a",
    labels={labels.LABEL_NODEPOOL: "default", labels.LABEL_ARCH: "amd64", labels.LABEL_OS: "linux"},
    cpu="4",
    memory="8Gi",
    pods="10000",
)
DAEMONSET_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "uid-ds", "controller": True}


def _full_claim(name: str, *, cpu: str = "1") -> dict[str, Any]:
    """A launched NodeClaim of pool default that counts `cpu` against its limits and has room for no pod."""
    return builders.nodeclaim(name, provider_id=f"fake:///{name}", capacity={"cpu": cpu, "memory": "1Gi", "pods": "0"})


def test_nomination_window() -> None:
    assert provisioner.nomination_window(10.0) == 20.0
    assert provisioner.nomination_window(2.0) == 10.0  # never under 10 s


async def test_pending_pods_get_a_nodeclaim_and_nominations() -> None:
    pods_ = [builders.pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(3)]
    env = _env(pools=[DEFAULT_POOL], pending=pods_)
    outcome = await env.prov.provision()
    claims = env.client.all(resources.NODECLAIMS)
    assert len(claims) == 1
    claim = claims[0]
    assert claim["metadata"]["generateName"] == "default-"
    assert claim["metadata"]["labels"][labels.LABEL_NODEPOOL] == "default"
    # 3 pods of 1 CPU: the claim asks for at least 3 CPUs
    assert quantity.parse(claim["spec"]["resources"]["requests"]["cpu"]) >= 3000
    assert [c.name for c in outcome.created] == [claim["metadata"]["name"]]
    assert set(outcome.created[0].pods) == {f"default/web-{i}" for i in range(3)}
    for i in range(3):
        assert env.recorder.reasons(f"web-{i}") == ["Nominated"]
    assert {e.message for e in env.recorder.events} == {
        f"Pod should schedule on: nodeclaim/{claim['metadata']['name']}"
    }
    assert env.counters.created == [("default", False)]
    assert len(env.counters.durations) == 1
    assert env.counters.unschedulable == [0]
    assert not outcome.failed


async def test_the_solve_runs_in_a_thread_without_the_collector() -> None:
    """The provisioner's worker thread pauses the collector for its solve (karpy.tasks), the loop's thread keeps it."""
    seen: list[tuple[bool, bool]] = []

    def solver(inp: scheduler.SchedulingInput) -> results.Results:
        seen.append((gc.isenabled(), threading.current_thread() is threading.main_thread()))
        return scheduler.solve(inp)

    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", cpu="1", memory="1Gi")], solver=solver)
    await env.prov.provision()
    assert seen == [(False, False)]
    assert gc.isenabled()


async def test_pods_fitting_an_existing_node_nominate_it() -> None:
    raw = builders.pod("web", cpu="1", memory="1Gi")
    pod = pods.from_manifest(raw)
    env = _env(pools=[DEFAULT_POOL], nodes=[NODE_A], pending=[raw])
    env.clock.set(100.0)
    outcome = await env.prov.provision()
    assert env.client.all(resources.NODECLAIMS) == []
    assert outcome.nominated == {"node-a": (pod.key,)}
    assert env.cluster.is_nominated("node-a")  # until now + max(2 × 10 s, 10 s)
    env.clock.set(119.0)
    assert env.cluster.is_nominated("node-a")
    env.clock.set(120.0)
    assert not env.cluster.is_nominated("node-a")
    assert env.recorder.events == [
        events.Recorded("Pod", "default", "web", pod.uid, "Normal", "Nominated", "Pod should schedule on: node/node-a")
    ]


def _logged(caplog: pytest.LogCaptureFixture, message: str) -> logging.LogRecord:
    """The one record whose message is exactly `message` (upstream's text, the variable parts in fields)."""
    (record,) = [r for r in caplog.records if r.getMessage() == message]
    return record


async def test_upstream_log_lines_carry_their_values_as_fields(caplog: pytest.LogCaptureFixture) -> None:
    pods_ = [builders.pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(7)]
    env = _env(pools=[DEFAULT_POOL], pending=pods_)
    with caplog.at_level(logging.INFO, logger=provisioner.__name__):
        outcome = await env.prov.provision()
    found = _logged(caplog, "found provisionable pod(s)")
    assert found.pods == "default/web-0, default/web-1, default/web-2, default/web-3, default/web-4 and 2 other(s)"
    assert found.duration >= 0
    computed = _logged(caplog, "computed new nodeclaim(s) to fit pod(s)")
    assert (computed.nodeclaims, computed.pods) == (1, 7)
    created = _logged(caplog, "created nodeclaim")
    assert (created.nodeclaim, created.nodepool) == (outcome.created[0].name, "default")
    assert quantity.parse(created.requests[labels.RESOURCE_CPU]) >= 7000
    assert getattr(created, "instance-types").startswith("fake-it-")


async def test_unready_node_line_and_no_found_line_without_new_capacity(caplog: pytest.LogCaptureFixture) -> None:
    env = _env(pools=[DEFAULT_POOL], nodes=[NODE_A], pending=[builders.pod("web", cpu="1", memory="1Gi")])
    with caplog.at_level(logging.INFO, logger=provisioner.__name__):
        await env.prov.provision()
    fits = _logged(caplog, "computed unready node(s) will fit pod(s)")
    assert (fits.nodes, fits.pods) == (1, 1)
    # upstream says "found provisionable pod(s)" only for batches that buy capacity
    assert [r for r in caplog.records if r.getMessage() == "found provisionable pod(s)"] == []


async def test_unschedulable_pod_gets_failed_scheduling_event() -> None:
    small = builders.parsed_pod("small", cpu="1", memory="1Gi")
    huge = builders.parsed_pod("huge", cpu="500", memory="1Gi")
    env = _env(
        pools=[DEFAULT_POOL],
        pending=[builders.pod("small", cpu="1", memory="1Gi"), builders.pod("huge", cpu="500", memory="1Gi")],
    )
    outcome = await env.prov.provision()
    assert set(outcome.failed) == {huge.key}
    (event,) = [e for e in env.recorder.events if e.name == huge.name]
    assert (event.type, event.reason) == ("Warning", "FailedScheduling")
    assert event.message == f"Failed to schedule pod, {outcome.failed[huge.key]}"  # the scheduler's own reason
    assert env.recorder.reasons(small.name) == ["Nominated"]
    assert env.counters.unschedulable == [1]


async def test_limits_rechecked_before_create() -> None:
    cluster: list[state_cluster.Cluster] = []

    def solve_then_another_claim(inp: scheduler.SchedulingInput) -> results.Results:
        plan = scheduler.solve(inp)
        (state,) = cluster  # the loop awaits this thread: it does not read the state meanwhile
        state.apply(resources.NODECLAIMS, kube_client.WatchEvent(kube_client.ADDED, _full_claim("other", cpu="17")))
        return plan

    env = _env(
        pools=[builders.nodepool("default", limits={"cpu": "16"}, requirements=[])],
        pending=[builders.pod("web", cpu="1", memory="1Gi")],
        solver=solve_then_another_claim,
    )
    cluster.append(env.cluster)
    # The scheduler's snapshot saw the pool empty; by the create, another claim has used it up.
    outcome = await env.prov.provision()
    assert env.client.all(resources.NODECLAIMS) == []
    assert "limits exceeded" in outcome.failed["default/web"]
    assert env.recorder.reasons("web") == ["FailedScheduling"]
    assert env.counters.failed == [("default", provisioner.LIMITS_EXCEEDED)]


async def test_limits_count_claims_created_earlier_in_the_batch() -> None:
    pool = builders.parsed_nodepool("default", limits={"nodes": "2"}, requirements=[])
    env = _env(
        pools=[builders.nodepool("default", limits={"nodes": "2"}, requirements=[])],
        claims=[_full_claim("one"), _full_claim("two")],
    )
    one = builders.parsed_pod("a", cpu="1", memory="1Gi")

    res = scheduler.solve(
        scheduler.SchedulingInput(pods=[one], nodepools=[pool], instance_types={"default": fake_catalog(4)})
    )
    plans = [res.new_nodeclaims[0], res.new_nodeclaims[0]]
    # usage 2 nodes == limit 2: the first create is allowed (not exceeded), the second would make it 3
    created, failures = await env.prov.create_nodeclaims(plans, {"default": pool})
    assert len(created) == 1
    assert len(failures) == 1
    assert "nodes resource usage of 3 exceeds limit of 2" in failures[0][1]


async def test_a_pass_creates_all_its_nodeclaims_at_once() -> None:
    pool = builders.parsed_nodepool("default", requirements=[])
    env = _env(pools=[DEFAULT_POOL])
    res = scheduler.solve(
        scheduler.SchedulingInput(
            pods=[builders.parsed_pod("a", cpu="1", memory="1Gi")],
            nodepools=[pool],
            instance_types={"default": fake_catalog(4)},
        )
    )
    in_flight, peak = 0, 0
    create = env.client.create

    async def counted_create(res_: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(3):  # every create of the pass is started before the first one is answered
            await asyncio.sleep(0)
        in_flight -= 1
        return await create(res_, body)

    env.client.create = counted_create  # type: ignore[method-assign,assignment]
    created, failures = await env.prov.create_nodeclaims([res.new_nodeclaims[0]] * 100, {"default": pool})
    assert (len(created), failures) == (100, [])
    # Upstream's CreateNodeClaims runs one worker per claim; the client's QPS limit paces them, not a pool of 32.
    assert peak == 100


async def test_pods_of_leaving_nodes_are_rescheduled_elsewhere() -> None:
    leaving_pod = builders.ready(builders.pod("db", cpu="2", memory="1Gi", node="old"))
    daemon = builders.ready(builders.pod("ds", cpu="1", memory="1Gi", node="old", owners=[DAEMONSET_OWNER]))
    old = builders.node("old", labels={labels.LABEL_NODEPOOL: "default"}, cpu="8", memory="16Gi", pods="10000")
    env = _env(pools=[DEFAULT_POOL], nodes=[old], pods=[leaving_pod, daemon])
    env.cluster.mark_for_deletion("old")
    outcome = await env.prov.provision()
    assert len(outcome.created) == 1
    assert outcome.created[0].pods == ("default/db",)  # not onto the leaving node, and not the DaemonSet pod
    assert outcome.nominated == {}


async def test_create_failure_reported_on_pods(caplog: pytest.LogCaptureFixture) -> None:
    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", memory="1Gi")])
    refused = kube_client.KubeError(500, "InternalError", "injected")
    env.client.next_create_error = refused
    outcome = await env.prov.provision()
    assert outcome.created == ()
    assert outcome.failed["default/web"].startswith("creating nodeclaim, 500 InternalError")
    assert env.counters.failed == [("default", provisioner.API_ERROR)]
    # The error shows in a plain log line (the extras do not) and in `karpy run`'s JSON, as a field too.
    (record,) = logtext.starting(caplog, "creating nodeclaim failed")
    assert logtext.plain(record) == f"creating nodeclaim failed: KubeError: {refused}"
    entry = logtext.as_json(record)
    assert (entry["message"], entry["error"], entry["nodepool"]) == (logtext.plain(record), str(refused), "default")


async def test_not_ready_pool_is_not_used() -> None:
    ready = builders.nodepool("ready", requirements=[])
    broken = builders.nodepool("broken", requirements=[], weight=100)  # it would win if it were considered
    broken["status"] = {"conditions": [builders.condition("Ready", "False", reason="NodeClassNotReady")]}
    env = _env(pools=[broken, ready], pending=[builders.pod("web", memory="1Gi")])
    outcome = await env.prov.provision()
    assert [c.nodepool for c in outcome.created] == ["ready"]


async def test_reconcile_batches_triggers_then_waits_for_sync() -> None:
    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", memory="1Gi")], synced=False)
    task = asyncio.ensure_future(env.prov.reconcile())
    await env.clock.settle()
    env.prov.trigger("uid-web")
    await env.clock.run_for(1.0)  # the idle window closes; the state is not synced yet
    assert not task.done()
    await env.clock.run_for(3.0)
    assert not task.done()
    provisioning_builders.list_all(env.cluster)
    await env.clock.run_for(1.0)
    outcome = await task
    assert outcome is not None
    assert len(outcome.created) == 1


async def test_reconcile_rescans_pending_pods_without_triggers() -> None:
    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", memory="1Gi")])
    task = asyncio.ensure_future(env.prov.reconcile())
    await env.clock.run_for(1.0)
    outcome = await task
    assert outcome is not None
    assert len(outcome.created) == 1
    # within the rescan interval a turn with no trigger forms no batch
    task = asyncio.ensure_future(env.prov.reconcile())
    await env.clock.run_for(1.0)
    assert await task is None


async def test_nothing_pending_means_nothing_done() -> None:
    env = _env(pools=[DEFAULT_POOL])
    assert await env.prov.provision() == provisioner.Outcome()
    assert env.recorder.events == []


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave the worker thread blocked


async def test_solve_past_deadline_stops_and_leaves_the_pods_for_the_next_pass(gate: threading.Event) -> None:
    def slow_solve(inp: scheduler.SchedulingInput) -> results.Results:
        # A bound on the worker thread only (a thread outlives the test's timeout), never reached when the test runs.
        assert gate.wait(timeout=60), "test never released the solver"
        return scheduler.solve(inp)  # the provisioner's deadline has passed by now: the solve stops at once

    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", memory="1Gi")], solver=slow_solve)
    task = asyncio.ensure_future(env.prov.provision())
    await env.clock.run_for(provisioner.SOLVE_TIMEOUT)
    gate.set()
    outcome = await task
    assert outcome.solve_timed_out
    assert outcome.created == ()


class BrokenCloud(fake_provider.FakeCloudProvider):
    def __init__(self) -> None:
        super().__init__(fake_catalog(4))
        self.failures = 1

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("provider outage")
        return await super().instance_types(pool)


async def test_run_survives_a_failed_pass() -> None:
    cloud = BrokenCloud()
    env = _env(pools=[DEFAULT_POOL], pending=[builders.pod("web", memory="1Gi")], cloud=cloud)
    async with tasks.running(env.prov.run):
        await env.clock.run_for(1.0)  # first batch: the provider fails, the loop backs off
        assert env.client.all(resources.NODECLAIMS) == []
        await env.clock.run_for(provisioner.ERROR_BACKOFF + provisioner.PENDING_RESCAN + 1.0)
        # the second pass solves in a worker thread, which runs in real time: wait for it
        assert len(await polling.until(lambda: env.client.all(resources.NODECLAIMS))) == 1


@pytest.mark.parametrize(
    ("owner", "terminating", "moves"),
    [
        ("ReplicaSet", False, True),
        ("ReplicaSet", True, False),  # evicted: its controller recreates it, not karpy
        ("", True, False),
        ("StatefulSet", True, True),  # recreated only once gone: room is bought now
        ("DaemonSet", False, False),
        ("Node", False, False),  # a mirror pod
    ],
)
def test_pods_of_a_leaving_node_that_need_a_new_home(owner: str, terminating: bool, moves: bool) -> None:
    # upstream's IsReschedulable (pkg/utils/pod/scheduling.go)
    pod = dataclasses.replace(
        builders.parsed_pod("p", memory="1Gi"), node_name="n1", owner_kind=owner, terminating=terminating
    )
    leaving = dataclasses.replace(builders.parsed_state_node("n1", bound=[pod]), deleting=True)
    staying = builders.parsed_state_node(
        "n2", bound=[dataclasses.replace(pod, name="q", node_name="n2", owner_kind="", terminating=False)]
    )
    moved = snapshot.reschedulable_pods([leaving, staying])
    assert [p.key for p in moved] == (["default/p"] if moves else [])
    assert all(p.node_name == "" for p in moved)
