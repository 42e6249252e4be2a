"""client-go's workqueue and controller-runtime's reconcile series for karpy's queues, driven through a running
WorkQueue on a manual clock and read back from a scrape: adds, waits, work, results, errors, retries, and the gauges
of a reconcile still running (depth, busy workers, unfinished work, the worker limit)."""

from __future__ import annotations

import asyncio

import prometheus_client
import prometheus_client.parser
from tests.wiring import test_gated_controllers as wiring_test_gated_controllers

from karpy import clock
from karpy.runtime import parts, workqueue
from karpy.runtime.metrics import queues

NODECLAIMS = {"controller": "nodeclaim.lifecycle", "name": "nodeclaim.lifecycle"}


def scraped(registry: prometheus_client.CollectorRegistry, series: str, **label_values: str) -> float:
    text = prometheus_client.generate_latest(registry).decode()
    for family in prometheus_client.parser.text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == series and s.labels == label_values:
                return float(s.value)
    return 0.0


async def test_a_queue_reports_what_client_go_and_controller_runtime_report() -> None:
    manual = clock.ManualClock(0.0)
    registry = prometheus_client.CollectorRegistry()
    series = queues.QueueSeries(registry)
    gate = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        if key == "broken":
            raise RuntimeError("a bug")
        if key == "slow":
            await manual.sleep(3.0)
            await gate.wait()
        return 30.0 if key == "again" else None

    queue = workqueue.WorkQueue(
        parts.NODECLAIMS, reconcile, clock=manual, workers=2, metrics=series.hooks(parts.NODECLAIMS)
    )
    registry.register(queues.QueueCollector(lambda: {parts.NODECLAIMS: queue}, now=manual.now))
    task = asyncio.create_task(queue.run())
    try:
        for key in ("ok", "ok", "again", "broken", "slow"):
            queue.add(key)  # the second "ok" is queued already: not an add
        await manual.run_for(4.0)  # before the broken key's 5 s backoff ends
        assert scraped(registry, "workqueue_adds_total", **NODECLAIMS) == 4
        assert scraped(registry, "workqueue_depth", **NODECLAIMS) == 0
        assert scraped(registry, "controller_runtime_active_workers", controller="nodeclaim.lifecycle") == 1
        assert scraped(registry, "controller_runtime_max_concurrent_reconciles", controller="nodeclaim.lifecycle") == 2
        assert scraped(registry, "workqueue_unfinished_work_seconds", **NODECLAIMS) == 4.0  # "slow", 4 s in
        assert scraped(registry, "workqueue_longest_running_processor_seconds", **NODECLAIMS) == 4.0
        results = {
            result: scraped(
                registry, "controller_runtime_reconcile_total", controller="nodeclaim.lifecycle", result=result
            )
            for result in (workqueue.SUCCESS, workqueue.REQUEUE_AFTER, workqueue.ERROR)
        }
        assert results == {workqueue.SUCCESS: 1, workqueue.REQUEUE_AFTER: 1, workqueue.ERROR: 1}
        assert scraped(registry, "controller_runtime_reconcile_errors_total", controller="nodeclaim.lifecycle") == 1
        assert scraped(registry, "workqueue_retries_total", **NODECLAIMS) == 1
        gate.set()
        await manual.settle()
        assert scraped(registry, "controller_runtime_active_workers", controller="nodeclaim.lifecycle") == 0
        assert scraped(registry, "workqueue_work_duration_seconds_count", **NODECLAIMS) == 4
        assert scraped(registry, "workqueue_work_duration_seconds_sum", **NODECLAIMS) == 4.0  # only "slow" took time
        assert (
            scraped(registry, "controller_runtime_reconcile_time_seconds_count", controller="nodeclaim.lifecycle") == 4
        )
        assert scraped(registry, "workqueue_queue_duration_seconds_count", **NODECLAIMS) == 4
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_object_graph_reports_every_queue() -> None:
    ctrl = wiring_test_gated_controllers._controller("NodeOverlay=true")
    text = ctrl.metrics.exposition().decode()
    for queue in ctrl.queues:
        controller = queues.controller_of(queue)
        assert f'workqueue_depth{{controller="{controller}",name="{controller}"}}' in text, queue
    ctrl.queue(parts.NODECLAIMS).add("default-abcde")  # the hooks are wired, not the base that counts nothing
    assert scraped(ctrl.metrics.registry, "workqueue_adds_total", **NODECLAIMS) == 1
