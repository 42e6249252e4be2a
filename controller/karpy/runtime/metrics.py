"""Prometheus metrics with upstream Karpenter's names, on a registry of our own (never the process-global one).

Counters and histograms are fed by hooks the reconcilers call (`provisioner_hooks`, `interruption_hooks`, ...).
Gauges describing the cluster (nodes, NodePool usage/limits, pods, cost per NodePool) are computed at scrape time
from the state cache by `StateCollector`, so they can never drift from what the controller decides on.
"""

from __future__ import annotations

import dataclasses
import platform
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final, Protocol

import prometheus_client
from prometheus_client import core as prometheus_client_core
from prometheus_client import registry as prometheus_client_registry

import karpy
from karpy import clock as karpy_clock
from karpy import rejections
from karpy.api import labels, nodepool
from karpy.cloudprovider import interruption, metered, types
from karpy.disruption import controller as disruption_controller
from karpy.interruption import controller as interruption_controller
from karpy.nodeclaim import conditions_controller, expiration, repair
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.provisioning import provisioner
from karpy.runtime import nodemetrics, scrapemetrics
from karpy.scheduling import pods as scheduling_pods
from karpy.state import statenode
from karpy.termination import controller as termination_controller

NAMESPACE: Final = "karpenter"
_DAY: Final = 24 * 3600.0
LIFETIME_BUCKETS: Final = (
    *(m * 60.0 for m in (15, 30, 45)), *(h * 3600.0 for h in (1, 2, 4, 6, 8, 10, 12, 16, 20)),
    *(d * _DAY for d in (1, 2, 3, 5, 10, 15, 20, 25, 30)),
)  # fmt: skip
"""Upstream's node lifetime buckets, 15 min to 30 days (core: node/termination/metrics.go)."""
MILLI_PER_UNIT: Final = 1000
DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
    120, 150, 300, 450, 600,
)  # fmt: skip
"""Upstream's buckets for duration histograms (core: pkg/metrics/constants.go `DurationBuckets`)."""
GO_DEFAULT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus's Go client `DefBuckets`, which upstream's histograms without buckets of their own get (Python's
default list differs)."""
PROVISIONER: Final = "provisioner"
"""The `controller` label of the scheduler series the provisioner feeds (upstream's controller name)."""
LEADER_LEASE: Final = "karpy-leader-election"
"""Default `name` label of leader_election_master_status: the Lease karpy elects on (LEADER_ELECTION_NAME)."""

CONSOLIDATION_TYPES: Final = {
    "emptiness": "empty",
    "multi-node-consolidation": "multi",
    "single-node-consolidation": "single",
}
"""consolidation_type of a disruption method (upstream `ConsolidationType()`; drift has none)."""

DISRUPTED_LABELS: Final = ("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode")
"""Labels of karpenter_nodeclaims_disrupted_total and karpenter_pods_disruption_initiated_total (core:
pkg/metrics/metrics.go)."""

PROVISIONING_REASON: Final = "provisioning"
"""reason of `karpenter_nodeclaims_created_total` for claims the provisioner creates for pending pods."""

INTERRUPTION_KINDS: Final[Mapping[str, str]] = {
    interruption.Kind.SPOT_INTERRUPTION: "spot_interrupted",
    interruption.Kind.REBALANCE_RECOMMENDATION: "rebalance_recommendation",
    interruption.Kind.SCHEDULED_CHANGE: "scheduled_change",
    interruption.Kind.INSTANCE_STOPPED: "instance_stopped",
    interruption.Kind.INSTANCE_TERMINATED: "instance_terminated",
    interruption.Kind.NO_OP: "no_op",
}
"""Upstream's label value for a message kind (aws: interruption/messages/types.go `Kind`), used as message_type
and as the reason of `karpenter_nodeclaims_disrupted_total`. Kinds missing here (capacity reservation, status
checks) are snake-cased, the form every upstream kind has."""

_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(text: str) -> str:
    """`Underutilized` → `underutilized`, `InsufficientCapacity` → `insufficient_capacity` (upstream
    `pretty.ToSnakeCase`, which turns disruption reasons into reason label values)."""
    return _WORD_START.sub("_", text).lower()


def interruption_kind(kind: str) -> str:
    return INTERRUPTION_KINDS.get(kind) or snake_case(kind)


PriceLookup = Callable[[str, str, str], float | None]
"""$/h of (instance type, zone, capacity type), None when unknown."""


class ClusterSource(Protocol):
    def synced(self) -> bool: ...
    def state_nodes(self) -> list[statenode.StateNode]: ...
    def nodepools(self) -> list[nodepool.NodePool]: ...
    def nodepool_usage(self, name: str) -> dict[str, int]: ...
    def pending_pods(self) -> list[scheduling_pods.Pod]: ...


def node_price(node: statenode.StateNode, price: PriceLookup) -> float | None:
    """The $/h the node's offering costs, from its instance-type, zone and capacity-type labels."""
    node_labels = node.labels
    instance_type = node_labels.get(labels.LABEL_INSTANCE_TYPE, "")
    zone = node_labels.get(labels.LABEL_ZONE, "")
    capacity_type = node_labels.get(labels.LABEL_CAPACITY_TYPE, "")
    if not (instance_type and zone and capacity_type):
        return None
    return price(instance_type, zone, capacity_type)


def nodepool_costs(nodes: Iterable[statenode.StateNode], price: PriceLookup) -> dict[str, float]:
    """$/h per NodePool: Σ offering prices of its nodes (launched or registered); unpriced nodes count 0 (pure)."""
    costs: dict[str, float] = {}
    for node in nodes:
        if not node.nodepool:
            continue
        costs[node.nodepool] = costs.get(node.nodepool, 0.0) + (node_price(node, price) or 0.0)
    return costs


def _resource_value(milli: int) -> float:
    """Milli-units as the plain number Prometheus shows (cores, bytes, counts)."""
    return milli / MILLI_PER_UNIT


class StateCollector(prometheus_client.registry.Collector):
    """Gauges read from the state cache at scrape time."""

    def __init__(self, cluster: ClusterSource, *, price: PriceLookup) -> None:
        self._cluster = cluster
        self._price = price

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        synced = self._cluster.synced()
        yield prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_cluster_state_synced", "1 when the cluster state cache has listed everything", synced
        )
        nodes = self._cluster.state_nodes()
        yield prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_cluster_state_node_count", "Nodes (and in-flight NodeClaims) in the state cache", len(nodes)
        )
        yield from self._nodes(nodes)
        yield from self._nodepools()
        yield from self._pods(nodes)
        cost = prometheus_client_core.GaugeMetricFamily(
            "karpy_nodepool_cost_per_hour", "On-demand/spot $/h of the nodes of each NodePool", labels=["nodepool"]
        )
        # upstream's name for the same sum (core: controllers/metrics/nodepool/controller.go)
        cost_total = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_nodepools_cost_total", "The $/h of the offerings of a NodePool's nodes", labels=["nodepool"]
        )
        for pool, dollars in sorted(nodepool_costs(nodes, self._price).items()):
            cost.add_metric([pool], dollars)
            cost_total.add_metric([pool], dollars)
        yield cost
        yield cost_total

    def _nodes(self, nodes: Sequence[statenode.StateNode]) -> Iterator[prometheus_client_core.Metric]:
        names = ["node_name", "nodepool", "resource_type"]
        allocatable = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_nodes_allocatable", "Node allocatable by resource", labels=names
        )
        requests = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_nodes_total_pod_requests", "Sum of the requests of the pods bound to the node", labels=names
        )
        for node in nodes:
            if node.node is None:
                continue
            for resource, milli in sorted(node.allocatable.items()):
                allocatable.add_metric([node.name, node.nodepool, resource], _resource_value(milli))
            totals: dict[str, int] = {}
            for pod in node.pods:
                for resource, milli in pod.requests.items():
                    totals[resource] = totals.get(resource, 0) + milli
            for resource, milli in sorted(totals.items()):
                requests.add_metric([node.name, node.nodepool, resource], _resource_value(milli))
        yield allocatable
        yield requests

    def _nodepools(self) -> Iterator[prometheus_client_core.Metric]:
        names = ["nodepool", "resource_type"]
        usage = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_nodepools_usage", "Resources used by a NodePool", labels=names
        )
        limit = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_nodepools_limit", "Limits of a NodePool", labels=names
        )
        for pool in self._cluster.nodepools():
            for resource, milli in sorted(self._cluster.nodepool_usage(pool.name).items()):
                usage.add_metric([pool.name, resource], _resource_value(milli))
            for resource, milli in sorted(pool.limits.items()):
                limit.add_metric([pool.name, resource], _resource_value(milli))
        yield usage
        yield limit

    def _pods(self, nodes: Sequence[statenode.StateNode]) -> Iterator[prometheus_client_core.Metric]:
        state = prometheus_client_core.GaugeMetricFamily(
            f"{NAMESPACE}_pods_state",
            "Pods the controller knows of: 1 per pod with its node, NodePool and phase",
            labels=["name", "namespace", "node", "nodepool", "phase"],
        )
        for pod in self._cluster.pending_pods():
            state.add_metric([pod.name, pod.namespace, "", "", "Pending"], 1)
        for node in nodes:
            for pod in node.pods:
                state.add_metric([pod.name, pod.namespace, node.name, node.nodepool, "Bound"], 1)
        yield state


@dataclasses.dataclass(frozen=True, slots=True)
class _Instruments:
    nodeclaims_created: prometheus_client.Counter
    nodeclaims_create_failed: prometheus_client.Counter
    nodeclaims_terminated: prometheus_client.Counter
    nodeclaims_disrupted: prometheus_client.Counter
    nodeclaims_drifted: prometheus_client.Counter
    nodeclaims_unhealthy_disrupted: prometheus_client.Counter
    nodes_created: prometheus_client.Counter
    nodes_drained: prometheus_client.Counter
    nodes_termination_duration: prometheus_client.Summary
    nodes_lifetime: prometheus_client.Histogram
    pods_drained: prometheus_client.Counter
    pods_eviction_requests: prometheus_client.Counter
    nodeclaims_termination_duration: prometheus_client.Histogram
    nodeclaims_instance_termination_duration: prometheus_client.Histogram
    nodes_terminated: prometheus_client.Counter
    scheduling_duration: prometheus_client.Histogram
    cloudprovider_duration: prometheus_client.Histogram
    cloudprovider_errors: prometheus_client.Counter
    unschedulable_pods: prometheus_client.Gauge
    ignored_pods: prometheus_client.Gauge
    pods_bound_duration: prometheus_client.Histogram
    pods_startup_duration: prometheus_client.Summary
    disruption_decisions: prometheus_client.Counter
    disruption_pool_decisions: prometheus_client.Counter
    disruption_evaluation: prometheus_client.Histogram
    consolidation_timeouts: prometheus_client.Counter
    failed_validations: prometheus_client.Counter
    queue_failures: prometheus_client.Counter
    pods_disruption_initiated: prometheus_client.Counter
    disruption_eligible_nodes: prometheus_client.Gauge
    interruption_received: prometheus_client.Counter
    interruption_deleted: prometheus_client.Counter
    interruption_actions: prometheus_client.Counter
    interruption_failed: prometheus_client.Counter
    interruption_dropped: prometheus_client.Counter
    interruption_latency: prometheus_client.Histogram
    interruption_unhealthy: prometheus_client.Counter
    objects_rejected: prometheus_client.Counter
    leader: prometheus_client.Gauge
    leader_election: prometheus_client.Gauge
    build_info: prometheus_client.Gauge


class Metrics:
    """The controller's registry and the hooks that feed it."""

    def __init__(self, *, lease_name: str = LEADER_LEASE) -> None:
        self.lease_name = lease_name
        self.registry = prometheus_client_registry.CollectorRegistry(auto_describe=True)
        self.prices = PriceBook()
        self.catalog = scrapemetrics.CatalogBook()
        self.solves = scrapemetrics.InFlightSolves()
        r = self.registry
        self.instruments = _Instruments(
            nodeclaims_created=prometheus_client.Counter(
                f"{NAMESPACE}_nodeclaims_created", "NodeClaims created", ["nodepool", "reason"], registry=r
            ),
            nodeclaims_create_failed=prometheus_client.Counter(
                "karpy_nodeclaims_create_failed",
                "NodeClaims the provisioner could not create: refused by NodePool limits or by the API server",
                ["nodepool", "reason"],
                registry=r,
            ),
            nodeclaims_terminated=prometheus_client.Counter(
                f"{NAMESPACE}_nodeclaims_terminated",
                "NodeClaims terminated (finalizer released after the instance was terminated)",
                ["nodepool", "capacity_type", "zone"],
                registry=r,
            ),
            nodeclaims_disrupted=prometheus_client.Counter(
                f"{NAMESPACE}_nodeclaims_disrupted",
                "NodeClaims deleted by a disruption (expiration, interruption, launch failure, timeout, ...)",
                DISRUPTED_LABELS,
                registry=r,
            ),
            pods_disruption_initiated=prometheus_client.Counter(
                f"{NAMESPACE}_pods_disruption_initiated",
                "Pod disruptions initiated: the reschedulable pods of each NodeClaim disrupted",
                DISRUPTED_LABELS,
                registry=r,
            ),
            nodeclaims_drifted=prometheus_client.Counter(
                "karpy_nodeclaims_drifted", "NodeClaims found drifted", ["type", "nodepool"], registry=r
            ),
            nodeclaims_unhealthy_disrupted=prometheus_client.Counter(
                f"{NAMESPACE}_nodeclaims_unhealthy_disrupted",
                "Unhealthy NodeClaims disrupted by node repair, by the node condition that was unhealthy",
                ["condition", "nodepool", "capacity_type", "image_id"],
                registry=r,
            ),
            nodes_created=prometheus_client.Counter(
                f"{NAMESPACE}_nodes_created", "Nodes registered for a NodeClaim", ["nodepool", "zone"], registry=r
            ),
            nodes_drained=prometheus_client.Counter(
                f"{NAMESPACE}_nodes_drained", "Nodes drained by karpy", ["nodepool"], registry=r
            ),
            nodes_termination_duration=prometheus_client.Summary(
                f"{NAMESPACE}_nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its finalizer",
                ["nodepool"],
                registry=r,
            ),
            nodes_lifetime=prometheus_client.Histogram(
                f"{NAMESPACE}_nodes_lifetime_duration_seconds",
                "The lifetime duration of the nodes since creation",
                ["nodepool"],
                buckets=LIFETIME_BUCKETS,
                registry=r,
            ),
            pods_drained=prometheus_client.Counter(
                f"{NAMESPACE}_pods_drained",
                "Pods drained during node termination, by the disruption reason of their node",
                ["reason"],
                registry=r,
            ),
            pods_eviction_requests=prometheus_client.Counter(
                f"{NAMESPACE}_pods_eviction_requests",
                "Pod eviction requests made, by response code",
                ["code"],
                registry=r,
            ),
            nodeclaims_termination_duration=prometheus_client.Histogram(
                f"{NAMESPACE}_nodeclaims_termination_duration_seconds",
                "Duration of NodeClaim termination in seconds",
                ["nodepool"],
                buckets=tuple(2.0**e for e in range(12)),  # upstream ExponentialBuckets(1, 2, 12)
                registry=r,
            ),
            nodeclaims_instance_termination_duration=prometheus_client.Histogram(
                f"{NAMESPACE}_nodeclaims_instance_termination_duration_seconds",
                "Duration of CloudProvider Instance termination in seconds",
                ["nodepool"],
                buckets=tuple(2.0**e for e in range(11)),  # upstream ExponentialBuckets(1, 2, 11)
                registry=r,
            ),
            nodes_terminated=prometheus_client.Counter(
                f"{NAMESPACE}_nodes_terminated", "Nodes drained and terminated", ["nodepool", "zone"], registry=r
            ),
            scheduling_duration=prometheus_client.Histogram(
                f"{NAMESPACE}_scheduler_scheduling_duration_seconds",
                "Duration of scheduling simulations used for deprovisioning and provisioning in seconds",
                ["controller"],
                buckets=DURATION_BUCKETS,
                registry=r,
            ),
            cloudprovider_duration=prometheus_client.Histogram(
                f"{NAMESPACE}_cloudprovider_duration_seconds",
                "Duration of cloud provider method calls, by the controller, method name and provider",
                ["controller", "method", "provider"],
                buckets=GO_DEFAULT_BUCKETS,
                registry=r,
            ),
            cloudprovider_errors=prometheus_client.Counter(
                f"{NAMESPACE}_cloudprovider_errors",
                "Errors of cloud provider method calls, by the controller, method name, provider and error kind",
                ["controller", "method", "provider", "error"],
                registry=r,
            ),
            ignored_pods=prometheus_client.Gauge(
                f"{NAMESPACE}_scheduler_ignored_pods_count",
                "Pending pods the last provisioning pass refused outright (unsupported constraints, DRA requests)",
                registry=r,
            ),
            unschedulable_pods=prometheus_client.Gauge(
                f"{NAMESPACE}_scheduler_unschedulable_pods_count",
                "Pods the last provisioning pass could not place",
                ["controller"],
                registry=r,
            ),
            pods_bound_duration=prometheus_client.Histogram(
                f"{NAMESPACE}_pods_bound_duration_seconds",
                "The time from pod creation until the pod is bound",
                buckets=DURATION_BUCKETS,
                registry=r,
            ),
            pods_startup_duration=prometheus_client.Summary(
                f"{NAMESPACE}_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running",
                registry=r,
            ),
            disruption_decisions=prometheus_client.Counter(
                f"{NAMESPACE}_voluntary_disruption_decisions",
                "Disruption decisions taken",
                ["decision", "reason", "consolidation_type"],
                registry=r,
            ),
            disruption_pool_decisions=prometheus_client.Counter(
                f"{NAMESPACE}_voluntary_disruption_decisions_by_nodepool",
                "Disruption decisions taken, by NodePool of their candidates",
                ["nodepool", "decision", "reason", "consolidation_type"],
                registry=r,
            ),
            disruption_evaluation=prometheus_client.Histogram(
                f"{NAMESPACE}_voluntary_disruption_decision_evaluation_duration_seconds",
                "Duration of the disruption decision evaluation process in seconds, by method",
                ["reason", "consolidation_type"],
                buckets=DURATION_BUCKETS,
                registry=r,
            ),
            consolidation_timeouts=prometheus_client.Counter(
                f"{NAMESPACE}_voluntary_disruption_consolidation_timeouts",
                "Times a consolidation method reached its timeout",
                ["consolidation_type"],
                registry=r,
            ),
            failed_validations=prometheus_client.Counter(
                f"{NAMESPACE}_voluntary_disruption_failed_validations",
                "Candidates selected for disruption that failed validation",
                ["consolidation_type"],
                registry=r,
            ),
            queue_failures=prometheus_client.Counter(
                f"{NAMESPACE}_voluntary_disruption_queue_failures",
                "Replacements of disruption commands the queue gave up on before they initialized",
                ["decision", "reason", "consolidation_type"],
                registry=r,
            ),
            disruption_eligible_nodes=prometheus_client.Gauge(
                f"{NAMESPACE}_voluntary_disruption_eligible_nodes",
                "Nodes that are disruption candidates in the last pass, by disruption class (graceful/eventual)",
                ["disruption_class"],
                registry=r,
            ),
            interruption_received=prometheus_client.Counter(
                f"{NAMESPACE}_interruption_received_messages",
                "Interruption messages received",
                ["message_type"],
                registry=r,
            ),
            interruption_deleted=prometheus_client.Counter(
                f"{NAMESPACE}_interruption_deleted_messages", "Interruption messages deleted", registry=r
            ),
            interruption_actions=prometheus_client.Counter(
                "karpy_interruption_actions_performed",
                "Actions taken on interruption messages",
                ["action_type", "message_type"],
                registry=r,
            ),
            interruption_failed=prometheus_client.Counter(
                "karpy_interruption_failed_messages",
                "Interruption messages whose handling failed (left on the queue for a retry)",
                ["message_type"],
                registry=r,
            ),
            interruption_dropped=prometheus_client.Counter(
                "karpy_interruption_messages_dropped",
                "Interruption messages deleted without being acted on: unreadable (not_json, malformed, "
                "unknown_event), internal_error, or retries_exhausted",
                ["reason"],
                registry=r,
            ),
            interruption_latency=prometheus_client.Histogram(
                f"{NAMESPACE}_interruption_message_queue_duration_seconds",
                "Time from an interruption event until its message was handled",
                buckets=DURATION_BUCKETS,
                registry=r,
            ),
            interruption_unhealthy=prometheus_client.Counter(
                f"{NAMESPACE}_interruption_instance_status_unhealthy",
                "Unique unhealthy instance statuses found by DescribeInstanceStatus, by status-check category",
                ["category"],
                registry=r,
            ),
            objects_rejected=prometheus_client.Counter(
                "karpy_objects_rejected",
                "Objects karpy cannot handle and leaves alone, once per object and problem: invalid (does not parse) "
                "or handling_failed (handling it raised)",
                ["kind", "reason"],
                registry=r,
            ),
            leader=prometheus_client.Gauge("karpy_leader", "1 while this replica holds the leader Lease", registry=r),
            leader_election=prometheus_client.Gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 master",
                ["name"],
                registry=r,
            ),
            build_info=prometheus_client.Gauge(
                f"{NAMESPACE}_build_info",
                "A metric with a constant '1' value labeled by version from which karpy was built",
                ["version", "goversion", "goarch", "commit"],
                registry=r,
            ),
        )
        for consolidation_type in ("multi", "single"):  # upstream starts both at 0 (disruption/metrics.go init)
            self.instruments.consolidation_timeouts.labels(consolidation_type=consolidation_type)
        # upstream's labels; goversion carries the Python runtime, the language this build runs on
        self.instruments.build_info.labels(
            version=karpy.__version__, goversion=f"python{platform.python_version()}",
            goarch=platform.machine(), commit="",
        ).set(1)  # fmt: skip

    def watch_state(self, cluster: ClusterSource) -> None:
        self.registry.register(StateCollector(cluster, price=self.prices.price))

    def watch_cluster_series(self, cluster: scrapemetrics.ClusterState, *, now: Callable[[], float]) -> None:
        """Budgets and status conditions from the state cache, the instance-type gauges from the last listing."""
        self.registry.register(scrapemetrics.BudgetCollector(cluster, now=now))
        self.registry.register(scrapemetrics.StatusConditionCollector(cluster, now=now))
        self.registry.register(nodemetrics.NodeSeriesCollector(cluster, now=now))
        self.registry.register(self.solves.collector(now=now))
        self.registry.register(self.catalog)

    def instance_types_listed(self, instance_types: Sequence[types.InstanceType]) -> None:
        """A NodePool's catalog as the provider listed it: prices for costs, shapes and offerings for gauges."""
        self.prices.update(instance_types)
        self.catalog.update(instance_types)

    def pod_bound(self, seconds: float) -> None:
        self.instruments.pods_bound_duration.observe(seconds)

    def pod_started(self, seconds: float) -> None:
        self.instruments.pods_startup_duration.observe(seconds)

    def metered(
        self, provider: types.CloudProvider, controller: str, *, clock: karpy_clock.Clock
    ) -> metered.MeteredProvider:
        """`provider` as `controller` calls it, timed and its errors counted (the cloudprovider series)."""
        i, name = self.instruments, provider.name
        return metered.MeteredProvider(
            provider,
            controller,
            clock=clock,
            observe=lambda ctrl, method, seconds: i.cloudprovider_duration.labels(
                controller=ctrl, method=method, provider=name
            ).observe(seconds),
            failed=lambda ctrl, method, error: i.cloudprovider_errors.labels(
                controller=ctrl, method=method, provider=name, error=error
            ).inc(),
        )

    def watch_cloud_calls(self, source: CloudCalls) -> None:
        self.registry.register(CloudCallCollector(source))

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)

    # --- hooks --------------------------------------------------------------------------------------------------

    def nodeclaim_created(self, nodepool_name: str, reason: str = PROVISIONING_REASON) -> None:
        self.instruments.nodeclaims_created.labels(nodepool=nodepool_name, reason=reason).inc()

    def nodeclaim_create_failed(self, nodepool_name: str, reason: str) -> None:
        self.instruments.nodeclaims_create_failed.labels(nodepool=nodepool_name, reason=reason).inc()

    def nodeclaim_disrupted(
        self,
        reason: str,
        nodepool_name: str,
        capacity_type: str,
        /,
        *,
        consolidation_policy: str = "",
        termination_mode: str = "",
        pods: int = 0,
    ) -> None:
        """One NodeClaim deleted for `reason` (a disruption reason such as Drifted or Expired, or an upstream
        label value already), counted under upstream's snake_case label value, and its reschedulable `pods` as
        disruptions initiated."""
        values = {
            "reason": snake_case(reason), "nodepool": nodepool_name, "capacity_type": capacity_type,
            "consolidation_policy": snake_case(consolidation_policy), "termination_mode": termination_mode,
        }  # fmt: skip
        self.instruments.nodeclaims_disrupted.labels(**values).inc()
        self.instruments.pods_disruption_initiated.labels(**values).inc(pods)

    def replacement_created(self, nodepool_name: str, reason: str) -> None:
        """A replacement NodeClaim launched by the disruption queue, counted like upstream under the lowercased
        disruption reason (empty, drifted, underutilized)."""
        self.nodeclaim_created(nodepool_name, snake_case(reason))

    def nodeclaim_terminated(self, nodepool_name: str, capacity_type: str = "", zone: str = "") -> None:
        self.instruments.nodeclaims_terminated.labels(
            nodepool=nodepool_name, capacity_type=capacity_type, zone=zone
        ).inc()

    def node_created(self, nodepool_name: str, zone: str = "") -> None:
        self.instruments.nodes_created.labels(nodepool=nodepool_name, zone=zone).inc()

    def node_terminated(self, nodepool_name: str, zone: str = "") -> None:
        self.instruments.nodes_terminated.labels(nodepool=nodepool_name, zone=zone).inc()

    def disruption_decision(self, decision: str, reason: str, consolidation_type: str = "") -> None:
        self.instruments.disruption_decisions.labels(
            decision=decision, reason=reason, consolidation_type=consolidation_type
        ).inc()

    def drift_hooks(self) -> conditions_controller.Metrics:
        drifted = self.instruments.nodeclaims_drifted
        return conditions_controller.Metrics(
            drifted=lambda reason, pool: drifted.labels(type=reason, nodepool=pool).inc()
        )

    def expiry_hooks(self) -> expiration.Metrics:
        return expiration.Metrics(disrupted=self.nodeclaim_disrupted)

    def repair_hooks(self) -> repair.Metrics:
        unhealthy = self.instruments.nodeclaims_unhealthy_disrupted
        return repair.Metrics(
            disrupted=self.nodeclaim_disrupted,
            unhealthy_disrupted=lambda condition, pool, capacity_type, image: unhealthy.labels(
                condition=condition, nodepool=pool, capacity_type=capacity_type, image_id=image
            ).inc(),
        )

    def nodeclaim_hooks(self) -> nodeclaim_controller.Metrics:
        i = self.instruments
        return nodeclaim_controller.Metrics(
            disrupted=self.nodeclaim_disrupted,
            instance_terminated=lambda pool, seconds: i.nodeclaims_instance_termination_duration.labels(
                nodepool=pool
            ).observe(seconds),
            terminated=lambda pool, seconds: i.nodeclaims_termination_duration.labels(nodepool=pool).observe(seconds),
        )

    def termination_hooks(self) -> termination_controller.Metrics:
        i = self.instruments

        def released(pool: str, since_deletion: float | None, lifetime: float | None) -> None:
            if since_deletion is not None:
                i.nodes_termination_duration.labels(nodepool=pool).observe(since_deletion)
            if lifetime is not None:
                i.nodes_lifetime.labels(nodepool=pool).observe(lifetime)

        return termination_controller.Metrics(
            node_terminated=self.node_terminated,
            node_released=released,
            node_drained=lambda pool: i.nodes_drained.labels(nodepool=pool).inc(),
            eviction_requested=lambda code: i.pods_eviction_requests.labels(code=code).inc(),
            pod_drained=lambda reason: i.pods_drained.labels(reason=reason).inc(),
        )

    def disruption_hooks(self) -> disruption_controller.Metrics:
        def decision(method: str, reason: str, decision: str) -> None:
            self.disruption_decision(decision, reason.lower(), CONSOLIDATION_TYPES.get(method, ""))

        def eligible(disruption_class: str, count: int) -> None:
            self.instruments.disruption_eligible_nodes.labels(disruption_class=disruption_class).set(count)

        i = self.instruments
        kind = CONSOLIDATION_TYPES.get
        return disruption_controller.Metrics(
            decision=decision,
            eligible_nodes=eligible,
            replacement_created=self.replacement_created,
            disrupted=self.nodeclaim_disrupted,
            pool_decision=lambda pool, method, reason, decision: i.disruption_pool_decisions.labels(
                nodepool=pool, decision=decision, reason=reason.lower(), consolidation_type=kind(method, "")
            ).inc(),
            evaluated=lambda method, reason, seconds: i.disruption_evaluation.labels(
                reason=reason.lower(), consolidation_type=kind(method, "")
            ).observe(seconds),
            timed_out=lambda method: i.consolidation_timeouts.labels(consolidation_type=kind(method, "")).inc(),
            failed_validation=lambda method, count: i.failed_validations.labels(
                consolidation_type=kind(method, "")
            ).inc(count),
            # upstream fills consolidation_type with the decision here (disruption/queue.go); karpy puts the
            # consolidation type the label names, as every other disruption series does
            queue_failed=lambda method, reason, decision, count: i.queue_failures.labels(
                decision=decision, reason=snake_case(reason), consolidation_type=kind(method, "")
            ).inc(count),
        )

    def provisioner_hooks(self) -> provisioner.Metrics:
        i = self.instruments
        return provisioner.Metrics(
            scheduling_duration=i.scheduling_duration.labels(controller=PROVISIONER).observe,
            nodeclaim_created=self.nodeclaim_created,
            nodeclaim_create_failed=self.nodeclaim_create_failed,
            pods_unschedulable=i.unschedulable_pods.labels(controller=PROVISIONER).set,
            pods_ignored=i.ignored_pods.set,
            solve_started=lambda scheduling_id, pods, start: self.solves.started(
                PROVISIONER, scheduling_id, pods=pods, start=start
            ),
            solve_finished=self.solves.finished,
        )

    def interruption_hooks(self) -> interruption_controller.Metrics:
        i = self.instruments
        return interruption_controller.Metrics(
            received=lambda kind: i.interruption_received.labels(message_type=interruption_kind(kind)).inc(),
            deleted=lambda _kind: i.interruption_deleted.inc(),
            action=lambda action, kind: i.interruption_actions.labels(
                action_type=action, message_type=interruption_kind(kind)
            ).inc(),
            failed=lambda kind: i.interruption_failed.labels(message_type=interruption_kind(kind)).inc(),
            dropped=lambda reason: i.interruption_dropped.labels(reason=reason).inc(),
            disrupted=lambda kind, pool, capacity_type: self.nodeclaim_disrupted(
                interruption_kind(kind), pool, capacity_type
            ),
            latency=i.interruption_latency.observe,
            unhealthy=lambda category: i.interruption_unhealthy.labels(category=category).inc(),
        )

    def rejection_hooks(self) -> rejections.Metrics:
        rejected = self.instruments.objects_rejected
        return rejections.Metrics(rejected=lambda kind, reason: rejected.labels(kind=kind, reason=reason).inc())

    def set_leader(self, leading: bool) -> None:
        self.instruments.leader.set(1 if leading else 0)
        self.instruments.leader_election.labels(name=self.lease_name).set(1 if leading else 0)


class HistogramSnapshot(Protocol):
    @property
    def buckets(self) -> tuple[tuple[float, int], ...]:
        """(upper bound, cumulative count), +Inf last."""
        ...

    @property
    def total(self) -> float: ...

    @property
    def count(self) -> int: ...


class BatchSnapshot(Protocol):
    @property
    def sizes(self) -> HistogramSnapshot: ...

    @property
    def window_seconds(self) -> HistogramSnapshot: ...


class CloudCalls(Protocol):
    """The cloud provider's count of its API calls (karpy.cloudprovider.aws.accounting.ApiCalls)."""

    def calls(self) -> Mapping[tuple[str, str], int]: ...
    def attempts(self) -> Mapping[tuple[str, str], int]: ...
    def errors(self) -> Mapping[tuple[str, str, str], int]: ...
    def batches(self) -> Mapping[str, BatchSnapshot]: ...
    def launch_failures(self) -> Mapping[tuple[str, str, str, str], int]: ...
    def termination_failures(self) -> Mapping[tuple[str, str], int]: ...


class CloudCallCollector(prometheus_client.registry.Collector):
    """Counters of every cloud API call and the request batchers' histograms, read from the provider's own count
    at scrape time (the calls happen in worker threads, where the counting is done)."""

    def __init__(self, source: CloudCalls) -> None:
        self._source = source

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        source = self._source
        for name, doc, table in (
            ("karpy_cloudprovider_api_calls", "Cloud provider API calls by service and operation", source.calls()),
            (
                "karpy_cloudprovider_api_attempts",
                "HTTP requests of cloud provider API calls (retries included) by service and operation",
                source.attempts(),
            ),
        ):
            family = prometheus_client_core.CounterMetricFamily(name, doc, labels=["service", "operation"])
            for (service, operation), count in sorted(table.items()):
                family.add_metric([service, operation], count)
            yield family
        errors = prometheus_client_core.CounterMetricFamily(
            "karpy_cloudprovider_api_errors",
            "Cloud provider API calls that failed after their retries, by error code",
            labels=["service", "operation", "code"],
        )
        for key, count in sorted(source.errors().items()):
            errors.add_metric(list(key), count)
        yield errors
        launches = prometheus_client_core.CounterMetricFamily(
            f"{NAMESPACE}_cloudprovider_instance_launch_failures",
            "Instance launch failures, by zone, zone id, capacity type and reason (aws: providers/instance/metrics.go)",
            labels=["zone", "zone_id", "capacity_type", "reason"],
        )
        for failure, count in sorted(source.launch_failures().items()):
            launches.add_metric(list(failure), count)
        yield launches
        terminations = prometheus_client_core.CounterMetricFamily(
            f"{NAMESPACE}_cloudprovider_instance_termination_failures",
            "Failed instance terminations, by zone and zone id",
            labels=["zone", "zone_id"],
        )
        for zone_key, count in sorted(source.termination_failures().items()):
            terminations.add_metric(list(zone_key), count)
        yield terminations
        sizes = prometheus_client_core.HistogramMetricFamily(
            f"{NAMESPACE}_cloudprovider_batcher_batch_size", "Size of the request batch per batcher", labels=["batcher"]
        )
        times = prometheus_client_core.HistogramMetricFamily(
            f"{NAMESPACE}_cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            labels=["batcher"],
        )
        for batcher, stats in sorted(source.batches().items()):
            for histogram_family, histogram in ((sizes, stats.sizes), (times, stats.window_seconds)):
                histogram_family.add_metric(
                    [batcher],
                    [(_bound(upper), count) for upper, count in histogram.buckets],
                    sum_value=histogram.total,
                )
        yield sizes
        yield times


def _bound(upper: float) -> str:
    return "+Inf" if upper == float("inf") else str(float(upper))


class PriceBook:
    """Offering prices by (instance type, zone, capacity type), refreshed from the provider's instance types."""

    def __init__(self) -> None:
        self._prices: dict[tuple[str, str, str], float] = {}

    def update(self, instance_types: Iterable[types.InstanceType]) -> None:
        for it in instance_types:
            for offering in it.offerings:
                self._prices[(it.name, offering.zone, offering.capacity_type)] = offering.price

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        return self._prices.get((instance_type, zone, capacity_type))
