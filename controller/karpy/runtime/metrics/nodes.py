"""Upstream's node, cluster and pod gauges, computed at scrape time from the state cache (core:
controllers/metrics/node/controller.go, controllers/metrics/pod/controller.go, controllers/state/metrics.go):

- per registered node: `karpenter_nodes_system_overhead` (the Node's capacity − allocatable),
  `_total_daemon_requests`, `_total_pod_limits`, `_total_daemon_limits` and `_current_lifetime_seconds`;
- `karpenter_cluster_utilization_percent{resource_type}`: Σ pod requests / Σ allocatable over every node;
- `karpenter_cluster_state_unsynced_time_seconds`: how long the cache has not been synced (0 when it is);
- per pod: `karpenter_pods_unbound_time_seconds` (not bound yet) and `_unstarted_time_seconds` (bound, not Ready),
  seconds since its creation, and `karpenter_pods_provisioning_unbound_time_seconds` / `_unstarted_time_seconds`
  since the provisioner first found it a place, `_scheduling_undecided_time_seconds` since it first saw a pending
  pod it has not decided on yet (`provisioning.podtimes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

import prometheus_client
from prometheus_client import core as prometheus_client_core

from karpy.api import decoding, labels, quantity
from karpy.kube import resources as kube_resources
from karpy.scheduling import resources
from karpy.state import facts, statenode

MILLI_PER_UNIT: Final = 1000
NODE_LABELS: Final = ("node_name", "nodepool", "resource_type")
"""The labels of karpy's per-node resource gauges (upstream adds every well-known node label)."""


class ClusterState(Protocol):
    def synced(self) -> bool: ...
    def state_nodes(self) -> list[statenode.StateNode]: ...
    def objects(self, res: kube_resources.Resource) -> list[Mapping[str, Any]]: ...


def resource_type(name: str) -> str:
    """A resource name as upstream labels it: lowercased, `-` as `_` (`ephemeral-storage` → `ephemeral_storage`)."""
    return name.lower().replace("-", "_")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _quantities(raw: Any) -> dict[str, int]:
    out = {}
    for name, value in _mapping(raw).items():
        try:
            out[str(name)] = quantity.parse(value)
        except (TypeError, ValueError):
            continue  # an unreadable quantity counts as none: the pod's other limits still do
    return out


def _daemon(pod: Mapping[str, Any]) -> bool:
    return any(
        _mapping(ref).get("controller") and _mapping(ref).get("kind") == "DaemonSet"
        for ref in facts.metadata(pod).get("ownerReferences") or ()
    )


def _created(obj: Mapping[str, Any]) -> float | None:
    value = facts.metadata(obj).get("creationTimestamp")
    if isinstance(value, int | float):
        return float(value)
    try:
        return decoding.timestamp(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        _mapping(c).get("type") == "Ready" and _mapping(c).get("status") == "True"
        for c in _mapping(pod.get("status")).get("conditions") or ()
    )


def _sum(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    return resources.add(*maps)


class PodTimes(Protocol):
    """The provisioner's instants per pod key (`provisioning.podtimes.PodTimes`)."""

    def seen_at(self, key: str) -> float | None: ...
    def decided_at(self, key: str) -> float | None: ...
    def schedulable_since(self, key: str) -> float | None: ...


class _NoTimes:
    def seen_at(self, key: str) -> float | None:
        return None

    def decided_at(self, key: str) -> float | None:
        return None

    def schedulable_since(self, key: str) -> float | None:
        return None


class NodeSeriesCollector(prometheus_client.registry.Collector):
    def __init__(self, cluster: ClusterState, *, now: Callable[[], float], pod_times: PodTimes | None = None) -> None:
        self._cluster = cluster
        self._now = now
        self._times: PodTimes = pod_times or _NoTimes()
        self._unsynced_since: float | None = None

    def _family(
        self, name: str, doc: str, names: Iterable[str] = NODE_LABELS
    ) -> prometheus_client_core.GaugeMetricFamily:
        return prometheus_client_core.GaugeMetricFamily(name, doc, labels=list(names))

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        now = self._now()
        yield from self._synced(now)
        pods = [p for p in self._cluster.objects(kube_resources.PODS) if not facts.pod_facts(p).terminal]
        by_node: dict[str, list[Mapping[str, Any]]] = {}
        for pod in pods:
            by_node.setdefault(facts.pod_facts(pod).node_name, []).append(pod)
        yield from self._nodes(self._cluster.state_nodes(), by_node, now)
        yield from self._pods(pods, now)

    def _synced(self, now: float) -> Iterator[prometheus_client_core.Metric]:
        if self._cluster.synced():
            self._unsynced_since = None
        elif self._unsynced_since is None:
            self._unsynced_since = now
        since = self._unsynced_since
        yield prometheus_client_core.GaugeMetricFamily(
            "karpenter_cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
            0.0 if since is None else now - since,
        )

    def _nodes(
        self, nodes: Iterable[statenode.StateNode], by_node: Mapping[str, list[Mapping[str, Any]]], now: float
    ) -> Iterator[prometheus_client_core.Metric]:
        overhead = self._family("karpenter_nodes_system_overhead", "Node capacity minus allocatable, by resource")
        daemon_requests = self._family(
            "karpenter_nodes_total_daemon_requests", "Sum of the requests of the node's DaemonSet pods"
        )
        pod_limits = self._family(
            "karpenter_nodes_total_pod_limits",
            "Sum of the limits of the pods bound to the node, DaemonSet pods included",
        )
        daemon_limits = self._family(
            "karpenter_nodes_total_daemon_limits", "Sum of the limits of the node's DaemonSet pods"
        )
        lifetime = self._family(
            "karpenter_nodes_current_lifetime_seconds", "Seconds since the node was created", ("node_name", "nodepool")
        )
        allocatable: dict[str, int] = {}
        requested: dict[str, int] = {}
        for n in nodes:
            if n.node is None:
                continue
            on_node = by_node.get(n.node_name, [])
            daemon_pods = {facts.key(p) for p in on_node if _daemon(p)}
            status = _mapping(n.node.get("status"))
            for family, amounts in (
                (
                    overhead,
                    resources.subtract(_quantities(status.get("capacity")), _quantities(status.get("allocatable"))),
                ),
                (daemon_requests, _sum(dict(p.requests) for p in n.pods if p.key in daemon_pods)),
                (pod_limits, _sum(p.limits for p in n.pods)),
                (daemon_limits, _sum(p.limits for p in n.pods if p.key in daemon_pods)),
            ):
                for name, milli in sorted(amounts.items()):
                    if milli > 0 and name != labels.RESOURCE_PODS:
                        family.add_metric([n.name, n.nodepool, resource_type(name)], milli / MILLI_PER_UNIT)
            created = _created(n.node)
            if created is not None:
                lifetime.add_metric([n.name, n.nodepool], max(0.0, now - created))
            allocatable = resources.add(allocatable, n.allocatable)
            requested = resources.add(requested, *(p.requests for p in n.pods))
        yield from (overhead, daemon_requests, pod_limits, daemon_limits, lifetime)
        utilization = self._family(
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            ("resource_type",),
        )
        for name, total in sorted(allocatable.items()):
            if total > 0:
                utilization.add_metric([resource_type(name)], 100.0 * requested.get(name, 0) / total)
        yield utilization

    def _pods(self, pods: Iterable[Mapping[str, Any]], now: float) -> Iterator[prometheus_client_core.Metric]:
        names = ("name", "namespace")
        unbound = self._family(
            "karpenter_pods_unbound_time_seconds", "Seconds a pod has not been bound since it was created", names
        )
        unstarted = self._family(
            "karpenter_pods_unstarted_time_seconds",
            "Seconds a bound pod has not been Ready since it was created",
            names,
        )
        provisioning_unbound = self._family(
            "karpenter_pods_provisioning_unbound_time_seconds",
            "Seconds a pod has not been bound since the provisioner first found it a place",
            names,
        )
        provisioning_unstarted = self._family(
            "karpenter_pods_provisioning_unstarted_time_seconds",
            "Seconds a bound pod has not been Ready since the provisioner first found it a place",
            names,
        )
        undecided = self._family(
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            "Seconds since the provisioner first saw a pending pod it has not decided on yet",
            names,
        )
        times = self._times
        for pod in pods:
            created = _created(pod)
            md = facts.metadata(pod)
            if created is None or md.get("deletionTimestamp"):
                continue
            bound = bool(facts.pod_facts(pod).node_name)
            if bound and _ready(pod):
                continue
            label_values = [str(md.get("name", "")), str(md.get("namespace", ""))]
            (unstarted if bound else unbound).add_metric(label_values, max(0.0, now - created))
            key = facts.key(pod)
            since = times.schedulable_since(key)
            if since is not None:
                family = provisioning_unstarted if bound else provisioning_unbound
                family.add_metric(label_values, max(0.0, now - since))
            seen = times.seen_at(key)
            if not bound and seen is not None and times.decided_at(key) is None:
                undecided.add_metric(label_values, max(0.0, now - seen))
        yield from (unbound, unstarted, provisioning_unbound, provisioning_unstarted, undecided)
