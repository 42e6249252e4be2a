"""A served scrape reads the controller's state on the event loop and renders in a worker thread; scrapes that
overlap share one render (`offloop`)."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp
import prometheus_client
from prometheus_client import core as prometheus_client_core
from tests import builders
from tests.runtime import exporting

from karpy import clock
from karpy.api import labels
from karpy.kube import client, resources
from karpy.provisioning import podtimes
from karpy.runtime import metrics, servers
from karpy.runtime.metrics import offloop, textformat
from karpy.state import cluster, statenode


class _Recording:
    """The state cache, recording the thread of every read of it."""

    def __init__(self, state: cluster.Cluster, threads: list[tuple[str, int]]) -> None:
        self._state = state
        self._threads = threads

    def __getattr__(self, name: str) -> Any:
        view = getattr(self._state, name)

        def read(*args: Any) -> Any:
            self._threads.append((name, threading.get_ident()))
            return view(*args)

        return read


class _Times:
    """Pod times that record the thread they are frozen on and the thread the frozen copy is read on."""

    def __init__(self, threads: list[tuple[str, int]]) -> None:
        self._threads = threads

    def seen_at(self, key: str) -> float | None:
        self._threads.append(("seen_at", threading.get_ident()))
        return exporting.START

    def decided_at(self, key: str) -> float | None:
        return None

    def schedulable_since(self, key: str) -> float | None:
        return None

    def frozen(self) -> _Times:
        self._threads.append(("frozen", threading.get_ident()))
        return self


def _small_cluster() -> cluster.Cluster:
    state = cluster.Cluster(clock=clock.ManualClock(exporting.START))
    for res in (resources.NODES, resources.PODS):
        state.mark_listed(res)
    node = builders.node("n1", labels={labels.LABEL_NODEPOOL: "web"}, capacity={"cpu": "4"})
    state.apply(resources.NODES, client.WatchEvent(client.ADDED, node))
    state.apply(resources.PODS, client.WatchEvent(client.ADDED, builders.pod("bound", node="n1")))
    pending = builders.pod("pending", created="2023-11-14T22:13:20Z")
    state.apply(resources.PODS, client.WatchEvent(client.ADDED, pending))
    return state


async def test_the_state_is_read_on_the_loop_and_rendered_off_it() -> None:
    threads: list[tuple[str, int]] = []
    source = _Recording(_small_cluster(), threads)
    m = metrics.Metrics()
    m.watch_state(source)  # type: ignore[arg-type]  # every view of the cache, recorded
    m.watch_cluster_series(source, now=lambda: exporting.START + 60, pod_times=_Times(threads))  # type: ignore[arg-type]
    threads.clear()  # registering collected once, on this thread
    loop_thread = threading.get_ident()
    async with (
        servers.serving(servers.metrics_app(m.scrape), host="127.0.0.1", port=0) as port,
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        served = await response.read()
    read_on_loop = {name for name, thread in threads if thread == loop_thread}
    read_off_loop = {name for name, thread in threads if thread != loop_thread}
    assert {"state_nodes", "objects", "synced", "frozen"} <= read_on_loop
    assert read_off_loop == {"seen_at"}  # only the frozen copy is read by the render
    assert [name for name, _ in threads].count("state_nodes") == 1  # one build of the nodes, shared
    assert served == m.exposition() == prometheus_client.generate_latest(m.registry)


def test_a_served_scrape_is_the_exposition_byte_for_byte() -> None:
    m = exporting.driven()  # runs loops of its own
    assert asyncio.run(m.scrape()) == m.exposition() == prometheus_client.generate_latest(m.registry)


class _Counting(offloop.DeferringCollector):
    """A collector counting its snapshots and renders, the render recording its thread."""

    def __init__(self) -> None:
        self.snapshots = 0
        self.render_threads: list[int] = []

    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        self.snapshots += 1
        taken = self.snapshots

        def render() -> Iterator[prometheus_client_core.Metric]:
            self.render_threads.append(threading.get_ident())
            yield prometheus_client_core.GaugeMetricFamily("karpy_test_snapshot", "Which snapshot", taken)

        return render


def _counting() -> tuple[metrics.Metrics, _Counting]:
    m = metrics.Metrics()
    counting = _Counting()
    m.registry.register(counting)  # registering collects once
    counting.snapshots, counting.render_threads = 0, []
    return m, counting


async def test_overlapping_scrapes_share_one_render() -> None:
    m, counting = _counting()
    first, second = await asyncio.gather(m.scrape(), m.scrape())
    assert first == second
    assert (counting.snapshots, len(counting.render_threads)) == (1, 1)
    assert counting.render_threads[0] != threading.get_ident()
    third = await m.scrape()  # after both: a scrape of its own, not the finished one
    assert counting.snapshots == 2
    assert b"karpy_test_snapshot 2.0" in third
    assert b"karpy_test_snapshot 1.0" in first


async def test_a_scraper_hanging_up_leaves_the_render_to_the_others() -> None:
    m, counting = _counting()
    leaving, staying = asyncio.create_task(m.scrape()), asyncio.create_task(m.scrape())
    await asyncio.sleep(0)  # both are waiting for the one render
    leaving.cancel()
    body = await staying
    assert leaving.cancelled()
    assert b"karpy_test_snapshot 1.0" in body
    assert counting.snapshots == 1


class _Failing(offloop.DeferringCollector):
    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        def render() -> Iterator[prometheus_client_core.Metric]:
            raise RuntimeError("render failed")

        return render

    def describe(self) -> list[prometheus_client_core.Metric]:
        return []  # registering renders nothing


async def test_a_failed_render_fails_its_scrapes_and_the_next_one_renders_afresh() -> None:
    m = metrics.Metrics()
    failing = _Failing()
    m.registry.register(failing)
    results = await asyncio.gather(m.scrape(), m.scrape(), return_exceptions=True)
    assert [str(r) for r in results] == ["render failed", "render failed"]
    m.registry.unregister(failing)
    assert await m.scrape() == m.exposition()


def _deep(objects: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return copy.deepcopy(objects)


def test_the_state_cache_replaces_objects_and_never_edits_them_in_place() -> None:
    """What a snapshot holds stays as it was taken while the loop applies later events: the render relies on it."""
    state = _small_cluster()
    pods, nodes = state.objects(resources.PODS), state.state_nodes()
    before_pods, before_nodes = _deep(pods), copy.deepcopy([dataclass_view(n) for n in nodes])
    moved = builders.node("n1", labels={labels.LABEL_NODEPOOL: "db"}, capacity={"cpu": "8"})
    state.apply(resources.NODES, client.WatchEvent(client.MODIFIED, moved))
    started = builders.pod("bound", node="n1")
    started["status"] = {"phase": "Running", "conditions": [builders.condition("Ready", "True")]}
    state.apply(resources.PODS, client.WatchEvent(client.MODIFIED, started))
    state.apply(resources.PODS, client.WatchEvent(client.MODIFIED, builders.pod("pending", node="n1")))
    state.apply(resources.PODS, client.WatchEvent(client.DELETED, builders.pod("pending", node="n1")))
    assert pods == before_pods
    assert [dataclass_view(n) for n in nodes] == before_nodes
    assert state.objects(resources.PODS) != before_pods  # the cache moved on


def dataclass_view(node: statenode.StateNode) -> dict[str, Any]:
    return {"node": node.node, "labels": dict(node.labels), "pods": [p.name for p in node.pods]}


def test_frozen_pod_times_do_not_change_with_the_provisioner() -> None:
    steps = clock.ManualClock(exporting.START)
    times = podtimes.PodTimes(steps)
    times.seen("default/a")
    frozen = times.frozen()
    steps.advance(5)
    times.decided(failed=[], placed=["default/a"])
    times.seen("default/b")
    times.forget("default/a")
    assert (frozen.seen_at("default/a"), frozen.decided_at("default/a")) == (exporting.START, None)
    assert frozen.seen_at("default/b") is None
    assert times.decided_at("default/a") is None
    assert times.seen_at("default/b") == exporting.START + 5


def test_the_per_object_families_keep_no_sample_objects_through_a_render() -> None:
    """A Sample per sample, alive until the render ends, is what brought on the garbage collector's full
    collection (which holds the loop too) at 50,000 pods: the families with a sample per object render from text."""
    m = exporting.driven()
    node_or_pod = ("karpenter_nodes_", "karpenter_pods_state")
    per_condition = ("_status_condition_count", "_current_status_seconds", "_termination_current_time_seconds")
    per_object = [
        f
        for f in m.registry.snapshot().collect()
        if f.type == "gauge" and (f.name.startswith(node_or_pod) or f.name.endswith(per_condition))
    ]
    assert len(per_object) == 7 + 1 + 3 * 6  # node gauges, pods_state, operatorpkg's per kind and deprecated
    assert all(isinstance(f, textformat.RenderedGauge) for f in per_object)
    assert all(f.texts for f in per_object if f.name.startswith("karpenter_"))
