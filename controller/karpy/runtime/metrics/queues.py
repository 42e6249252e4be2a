"""client-go's workqueue series and controller-runtime's reconcile series for karpy's own work queues
(`runtime.workqueue`), under upstream's names, each queue labelled with the upstream controller it stands for.

Counters and histograms are fed by the queue's hooks; depth, busy workers, the worker limit and the age of running
reconciles are read from the queues at scrape time. Labels are controller-runtime's: `controller` and `name` (the
queue, named after its controller as controller-runtime names it) on the workqueue series, `controller` (and
`result`) on the reconcile series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

import prometheus_client
from prometheus_client import core as prometheus_client_core
from prometheus_client import registry as prometheus_client_registry

from karpy.runtime import parts, workqueue

CONTROLLERS: Final[Mapping[str, str]] = {
    parts.NODECLAIMS: "nodeclaim.lifecycle",
    parts.NODES: "node.termination",
    parts.NODEPOOLS: "nodepool.readiness",
    parts.NODECLASSES: "nodeclass",
    parts.NODEOVERLAYS: "nodeoverlay",
    parts.STATIC_NODEPOOLS: "static.provisioning",
    parts.CAPACITYBUFFERS: "capacitybuffer",
}
"""The upstream controller each of karpy's queues does the work of (its name upstream)."""
WORK_BUCKETS: Final = tuple(1e-8 * 10.0**e for e in range(12))
"""client-go's workqueue duration buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s."""
RECONCILE_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip
"""controller-runtime's reconcile_time_seconds buckets (internal/controller/metrics)."""


def controller_of(queue: str) -> str:
    return CONTROLLERS.get(queue, queue)


class QueueSeries:
    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        names = ["controller", "name"]
        r = registry
        self.adds = prometheus_client.Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", names, registry=r
        )
        self.retries = prometheus_client.Counter(
            "workqueue_retries", "Total number of retries handled by workqueue", names, registry=r
        )
        self.queue_duration = prometheus_client.Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            names,
            buckets=WORK_BUCKETS,
            registry=r,
        )
        self.work_duration = prometheus_client.Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            names,
            buckets=WORK_BUCKETS,
            registry=r,
        )
        self.reconciles = prometheus_client.Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = prometheus_client.Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = prometheus_client.Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )

    def hooks(self, queue: str) -> workqueue.Metrics:
        return _Hooks(self, controller_of(queue))


class _Hooks(workqueue.Metrics):
    """`workqueue.Metrics` on the series, labelled with the queue's controller."""

    def __init__(self, series: QueueSeries, controller: str) -> None:
        self._series = series
        self._controller = controller
        self._labels = {"controller": controller, "name": controller}

    def added(self) -> None:
        self._series.adds.labels(**self._labels).inc()

    def waited(self, seconds: float) -> None:
        self._series.queue_duration.labels(**self._labels).observe(seconds)

    def worked(self, seconds: float) -> None:
        self._series.work_duration.labels(**self._labels).observe(seconds)
        self._series.reconcile_time.labels(controller=self._controller).observe(seconds)

    def reconciled(self, result: str) -> None:
        self._series.reconciles.labels(controller=self._controller, result=result).inc()
        if result == workqueue.ERROR:
            self._series.reconcile_errors.labels(controller=self._controller).inc()

    def retried(self) -> None:
        self._series.retries.labels(**self._labels).inc()


class QueueCollector(prometheus_client.registry.Collector):
    """The gauges of every queue, read when scraped."""

    def __init__(self, queues: Callable[[], Mapping[str, workqueue.WorkQueue]], *, now: Callable[[], float]) -> None:
        self._queues = queues
        self._now = now

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        names = ["controller", "name"]
        depth = prometheus_client_core.GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=names)
        unfinished = prometheus_client_core.GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            labels=names,
        )
        longest = prometheus_client_core.GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            labels=names,
        )
        active = prometheus_client_core.GaugeMetricFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            labels=["controller"],
        )
        limit = prometheus_client_core.GaugeMetricFamily(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            labels=["controller"],
        )
        now = self._now()
        for queue_name, queue in sorted(self._queues().items()):
            controller = controller_of(queue_name)
            ages = [max(0.0, now - start) for start in queue.running_since().values()]
            depth.add_metric([controller, controller], len(queue))
            unfinished.add_metric([controller, controller], sum(ages))
            longest.add_metric([controller, controller], max(ages, default=0.0))
            active.add_metric([controller], len(ages))
            limit.add_metric([controller], queue.workers)
        yield from (depth, unfinished, longest, active, limit)
