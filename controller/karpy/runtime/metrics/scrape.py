"""Upstream series computed at scrape time from the state cache and the provider's catalog, so they can never
drift from what the controller decides on: disruption budgets per NodePool, status conditions per object, and
the instance-type gauges of the AWS provider.

- `karpenter_nodepools_allowed_disruptions{nodepool,reason}` and `karpenter_nodepools_nodes_consuming_budgets`
  (core: disruption/helpers.go `BuildDisruptionBudgetMapping`, which sets them for every reason on each pass);
- `operator_<kind>_status_condition_count` and `..._current_status_seconds` for NodePools, NodeClaims, Nodes
  and EC2NodeClasses (operatorpkg: status/metrics.go, one family per kind since Karpenter v1.1);
- `karpenter_cloudprovider_instance_type_{cpu_cores,memory_bytes,offering_available,offering_price_estimate}`
  (aws: providers/instancetype/metrics.go, controllers/metrics/metrics.go).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

import prometheus_client
from prometheus_client import core as prometheus_client_core

from karpy.api import budgets as api_budgets
from karpy.api import decoding, ec2nodeclass, meta, nodeclaim, nodepool
from karpy.cloudprovider import types
from karpy.disruption import budgets
from karpy.kube import resources
from karpy.state import statenode

CONDITION_LABELS: Final = ("namespace", "name", "group", "kind", "type", "status", "reason")
"""operatorpkg's labels of the per-object condition gauges (status/metrics.go)."""
MILLI_PER_UNIT: Final = 1000


class ClusterState(Protocol):
    def synced(self) -> bool: ...
    def objects(self, res: resources.Resource) -> list[Mapping[str, Any]]: ...
    def state_nodes(self) -> list[statenode.StateNode]: ...
    def nodepools(self) -> list[nodepool.NodePool]: ...
    def nodeclaims(self) -> list[nodeclaim.NodeClaim]: ...
    def nodeclasses(self) -> dict[str, ec2nodeclass.EC2NodeClass]: ...


class BudgetCollector(prometheus_client.registry.Collector):
    """Allowed disruptions and the nodes consuming them, per NodePool and disruption reason."""

    def __init__(self, cluster: ClusterState, *, now: Callable[[], float]) -> None:
        self._cluster = cluster
        self._now = now

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
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
        nodes = self._cluster.state_nodes()
        total, disrupting = budgets.counts(nodes)
        now = self._now()
        for pool in self._cluster.nodepools():
            for reason in nodepool.DisruptionReason:
                count = total.get(pool.name, 0)
                allowed.add_metric([pool.name, str(reason)], api_budgets.allowed_disruptions(pool, reason, count, now))
                consuming.add_metric([pool.name, str(reason)], disrupting.get(pool.name, 0))
        yield allowed
        yield consuming


@dataclasses.dataclass(frozen=True, slots=True)
class _Object:
    namespace: str
    name: str
    conditions: tuple[meta.Condition, ...]


def _node_conditions(node: Mapping[str, Any]) -> tuple[meta.Condition, ...]:
    out = []
    for raw in (node.get("status") or {}).get("conditions") or ():
        if isinstance(raw, Mapping) and raw.get("type"):
            try:
                since: float | None = decoding.timestamp(str(raw["lastTransitionTime"]))
            except (KeyError, ValueError):
                since = None
            out.append(meta.Condition(type=str(raw["type"]), status=str(raw.get("status", "")),
                                      reason=str(raw.get("reason") or ""), last_transition_time=since))  # fmt: skip
    return tuple(out)


class StatusConditionCollector(prometheus_client.registry.Collector):
    """One gauge sample per object and condition (operatorpkg's per-kind condition families)."""

    def __init__(self, cluster: ClusterState, *, now: Callable[[], float]) -> None:
        self._cluster = cluster
        self._now = now

    def _kinds(self) -> Iterator[tuple[str, str, str, Iterable[_Object]]]:
        cluster = self._cluster
        yield (
            "nodepool",
            "karpenter.sh",
            "NodePool",
            (_Object("", p.name, p.status.conditions) for p in cluster.nodepools()),
        )
        yield (
            "nodeclaim",
            "karpenter.sh",
            "NodeClaim",
            (_Object("", c.metadata.name, c.status.conditions) for c in cluster.nodeclaims()),
        )
        yield (
            "node",
            "",
            "Node",
            (_Object("", n.name, _node_conditions(n.node)) for n in cluster.state_nodes() if n.node is not None),
        )
        yield (
            "ec2nodeclass",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            (_Object("", name, c.status.conditions) for name, c in sorted(cluster.nodeclasses().items())),
        )

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        now = self._now()
        for prefix, group, kind, objects in self._kinds():
            count = prometheus_client_core.GaugeMetricFamily(
                f"operator_{prefix}_status_condition_count",
                "The number of a condition for a given object, type and status",
                labels=list(CONDITION_LABELS),
            )
            current = prometheus_client_core.GaugeMetricFamily(
                f"operator_{prefix}_status_condition_current_status_seconds",
                "The current amount of time in seconds that a status condition has been in a specific state",
                labels=list(CONDITION_LABELS),
            )
            for obj in objects:
                for c in obj.conditions:
                    values = [obj.namespace, obj.name, group, kind, c.type, c.status, c.reason]
                    count.add_metric(values, 1)
                    if c.last_transition_time is not None:
                        current.add_metric(values, max(0.0, now - c.last_transition_time))
            yield count
            yield current


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
