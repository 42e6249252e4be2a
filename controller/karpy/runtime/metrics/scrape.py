"""Upstream series computed at scrape time from the state cache and the provider's catalog, so they can never
drift from what the controller decides on: disruption budgets per NodePool and the instance-type gauges of the AWS
provider (the status-condition gauges are module `operatorpkg`'s).

- `karpenter_nodepools_allowed_disruptions{nodepool,reason}` and `karpenter_nodepools_nodes_consuming_budgets`
  (core: disruption/helpers.go `BuildDisruptionBudgetMapping`, which sets them for every reason on each pass);
- `karpenter_cloudprovider_instance_type_{cpu_cores,memory_bytes,offering_available,offering_price_estimate}`
  (aws: providers/instancetype/metrics.go, controllers/metrics/metrics.go).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

import prometheus_client
from prometheus_client import core as prometheus_client_core

from karpy.api import budgets as api_budgets
from karpy.api import nodepool
from karpy.cloudprovider import types
from karpy.disruption import budgets
from karpy.runtime.metrics import offloop
from karpy.state import cluster as state_cluster
from karpy.state import statenode

MILLI_PER_UNIT: Final = 1000


class BudgetCollector(offloop.DeferringCollector):
    """Allowed disruptions and the nodes consuming them, per NodePool and disruption reason, computed in the
    snapshot itself (a few per NodePool)."""

    def __init__(self, cluster: state_cluster.Cluster, *, now: Callable[[], float]) -> None:
        self._cluster = cluster
        self._now = now

    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        families = list(self._families(reads.state_nodes(self._cluster)))
        return lambda: families

    def _families(self, nodes: Sequence[statenode.StateNode]) -> Iterator[prometheus_client_core.Metric]:
        allowed = prometheus_client_core.GaugeMetricFamily(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time",
            labels=["nodepool", "reason"],
        )
        consuming = prometheus_client_core.GaugeMetricFamily(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time",
            labels=["nodepool", "reason"],
        )
        total, disrupting = budgets.counts(nodes)
        now = self._now()
        for pool in self._cluster.nodepools():
            for reason in nodepool.DisruptionReason:
                count = total.get(pool.name, 0)
                allowed.add_metric([pool.name, str(reason)], api_budgets.allowed_disruptions(pool, reason, count, now))
                consuming.add_metric([pool.name, str(reason)], disrupting.get(pool.name, 0))
        yield allowed
        yield consuming


class CatalogBook:
    """The instance types last listed per NodePool refresh: shapes and offerings, for the cloudprovider gauges."""

    def __init__(self) -> None:
        self._shapes: dict[str, tuple[float, float]] = {}
        self._offerings: dict[tuple[str, str, str], tuple[bool, float]] = {}

    def update(self, instance_types: Iterable[types.InstanceType]) -> None:
        for it in instance_types:
            cpu = it.capacity.get("cpu", 0) / MILLI_PER_UNIT
            memory = it.capacity.get("memory", 0) / MILLI_PER_UNIT
            self._shapes[it.name] = (cpu, memory)
            for o in it.offerings:
                self._offerings[(it.name, o.capacity_type, o.zone)] = (o.available, o.price)

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        cpu = prometheus_client_core.GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_cpu_cores", "VCPUs cores for a given instance type",
            labels=["instance_type"],
        )  # fmt: skip
        memory = prometheus_client_core.GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for a given instance type",
            labels=["instance_type"],
        )  # fmt: skip
        for name, (cores, bytes_) in sorted(self._shapes.items()):
            cpu.add_metric([name], cores)
            memory.add_metric([name], bytes_)
        names = ["instance_type", "capacity_type", "zone"]
        available = prometheus_client_core.GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone",
            labels=names,
        )
        price = prometheus_client_core.GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "Instance type offering estimated hourly price, based on instance type, capacity type, and zone",
            labels=names,
        )
        for key, (is_available, dollars) in sorted(self._offerings.items()):
            available.add_metric(list(key), 1 if is_available else 0)
            price.add_metric(list(key), dollars)
        yield from (cpu, memory, available, price)


class InFlightSolves:
    """The scheduling simulations running now (in a worker thread), for upstream's per-solve gauges
    `karpenter_scheduler_queue_depth` and `_unfinished_work_seconds` (core: provisioning/scheduling/metrics.go):
    a series per solve, gone when it ends. karpy's solve does not report its progress, so the depth is the number
    of pods it was given."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[str, int, float]] = {}

    def started(self, controller: str, scheduling_id: str, *, pods: int, start: float) -> None:
        self._running[scheduling_id] = (controller, pods, start)

    def finished(self, scheduling_id: str) -> None:
        self._running.pop(scheduling_id, None)

    def collector(self, *, now: Callable[[], float]) -> prometheus_client.registry.Collector:
        running = self._running

        class _Collector(prometheus_client.registry.Collector):
            def collect(self) -> Iterator[prometheus_client_core.Metric]:
                names = ["controller", "scheduling_id"]
                depth = prometheus_client_core.GaugeMetricFamily(
                    "karpenter_scheduler_queue_depth", "The number of pods waiting to be scheduled", labels=names
                )
                unfinished = prometheus_client_core.GaugeMetricFamily(
                    "karpenter_scheduler_unfinished_work_seconds",
                    "Seconds of work in progress not yet observed by scheduling_duration_seconds",
                    labels=names,
                )
                at = now()
                for scheduling_id, (controller, pods, start) in sorted(dict(running).items()):
                    depth.add_metric([controller, scheduling_id], pods)
                    unfinished.add_metric([controller, scheduling_id], max(0.0, at - start))
                yield depth
                yield unfinished

        return _Collector()
