"""Gauges describing the cluster (NodePool usage and limits, cost per NodePool), computed at scrape time from the
state cache, so they can never drift from what the controller decides on. The per-node and per-pod gauges, which
need the raw Node and Pod objects for upstream's labels, are `nodes`'."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import core as prometheus_client_core

from karpy.api import labels
from karpy.runtime.metrics import naming, offloop
from karpy.state import cluster as state_cluster
from karpy.state import statenode

PriceLookup = Callable[[str, str, str], float | None]
"""$/h of (instance type, zone, capacity type), None when unknown."""


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


def unpriced(nodes: Iterable[statenode.StateNode], price: PriceLookup) -> dict[str, str]:
    """{node name: NodePool} of the NodePools' nodes whose offering labels are all set yet name no offering with a
    price: what upstream's cost tracker fails to add (core: pkg/state/cost/cost.go `UpdateNodeClaim`). A node still
    missing a label is not an error there either: the labels come later (pure)."""
    out: dict[str, str] = {}
    for node in nodes:
        node_labels = node.labels
        keys = (labels.LABEL_INSTANCE_TYPE, labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE)
        if node.nodepool and all(node_labels.get(k) for k in keys) and node_price(node, price) is None:
            out[node.name] = node.nodepool
    return out


def _resource_value(milli: int) -> float:
    """Milli-units as the plain number Prometheus shows (cores, bytes, counts)."""
    return milli / naming.MILLI_PER_UNIT


class StateCollector(offloop.DeferringCollector):
    """Gauges read from the state cache at scrape time: a few per NodePool, computed in the snapshot itself."""

    def __init__(
        self, cluster: state_cluster.Cluster, *, price: PriceLookup, listed: Callable[[], bool] = lambda: True
    ) -> None:
        self._cluster = cluster
        self._price = price
        self._listed = listed
        self._unpriced: set[str] = set()  # nodes already counted as a cost-tracking error, while they stay unpriced
        self._cost_errors: dict[str, int] = {}  # NodePool -> errors counted

    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        families = list(self._families(reads.state_nodes(self._cluster)))
        return lambda: families

    def _families(self, nodes: Sequence[statenode.StateNode]) -> Iterator[prometheus_client_core.Metric]:
        synced = self._cluster.synced()
        yield prometheus_client_core.GaugeMetricFamily(
            f"{naming.NAMESPACE}_cluster_state_synced", "1 when the cluster state cache has listed everything", synced
        )
        yield prometheus_client_core.GaugeMetricFamily(
            f"{naming.NAMESPACE}_cluster_state_node_count",
            "Nodes (and in-flight NodeClaims) in the state cache",
            len(nodes),
        )
        yield from self._nodepools()
        cost = prometheus_client_core.GaugeMetricFamily(
            "karpy_nodepool_cost_per_hour", "On-demand/spot $/h of the nodes of each NodePool", labels=["nodepool"]
        )
        # upstream's name for the same sum (core: controllers/metrics/nodepool/controller.go)
        cost_total = prometheus_client_core.GaugeMetricFamily(
            f"{naming.NAMESPACE}_nodepools_cost_total",
            "The $/h of the offerings of a NodePool's nodes",
            labels=["nodepool"],
        )
        for pool, dollars in sorted(nodepool_costs(nodes, self._price).items()):
            cost.add_metric([pool], dollars)
            cost_total.add_metric([pool], dollars)
        yield cost
        yield cost_total
        yield self._cost_tracker_errors(nodes)

    def _cost_tracker_errors(self, nodes: Sequence[statenode.StateNode]) -> prometheus_client_core.Metric:
        """karpenter_nodepools_cost_tracker_errors_total: one per node that turns unpriceable (counted once while it
        stays so; again if it recovers and fails anew), by NodePool."""
        failing = unpriced(nodes, self._price) if self._listed() else {}
        for name, pool in failing.items():
            if name not in self._unpriced:
                self._cost_errors[pool] = self._cost_errors.get(pool, 0) + 1
        self._unpriced = set(failing)
        family = prometheus_client_core.CounterMetricFamily(
            f"{naming.NAMESPACE}_nodepools_cost_tracker_errors",
            "Nodes whose offering could not be priced for the NodePool cost, by NodePool",
            labels=["nodepool"],
        )
        for pool, count in sorted(self._cost_errors.items()):
            family.add_metric([pool], count)
        return family

    def _nodepools(self) -> Iterator[prometheus_client_core.Metric]:
        names = ["nodepool", "resource_type"]
        usage = prometheus_client_core.GaugeMetricFamily(
            f"{naming.NAMESPACE}_nodepools_usage", "Resources used by a NodePool", labels=names
        )
        limit = prometheus_client_core.GaugeMetricFamily(
            f"{naming.NAMESPACE}_nodepools_limit", "Limits of a NodePool", labels=names
        )
        for pool in self._cluster.nodepools():
            for resource, milli in sorted(self._cluster.nodepool_usage(pool.name).items()):
                usage.add_metric([pool.name, resource], _resource_value(milli))
            for resource, milli in sorted(pool.limits.items()):
                limit.add_metric([pool.name, resource], _resource_value(milli))
        yield usage
        yield limit
