"""Upstream's node, cluster and pod gauges, computed at scrape time from the state cache (core:
controllers/metrics/node/controller.go, controllers/metrics/pod/controller.go, controllers/state/metrics.go):

- per registered node, labelled as upstream (`nodelabels`): `karpenter_nodes_allocatable`, `_system_overhead` (the
  Node's capacity − allocatable), `_total_pod_requests`, `_total_daemon_requests`, `_total_pod_limits`,
  `_total_daemon_limits` and `_current_lifetime_seconds`;
- per pod, terminal ones included: `karpenter_pods_state`, labelled as upstream (`nodelabels`);
- `karpenter_cluster_utilization_percent{resource_type}`: Σ pod requests / Σ allocatable over every node;
- `karpenter_cluster_state_unsynced_time_seconds`: how long the cache has not been synced (0 when it is);
- per pod: `karpenter_pods_unbound_time_seconds` (not bound yet) and `_unstarted_time_seconds` (bound, not Ready),
  seconds since its creation, and `karpenter_pods_provisioning_unbound_time_seconds` / `_unstarted_time_seconds`
  since the provisioner first found it a place, `_scheduling_undecided_time_seconds` since it first saw a pending
  pod it has not decided on yet (`provisioning.podtimes`).

The collector defers its render (`offloop`): its snapshot is the cache's node and pod lists and a frozen copy of the
pod times; the labels it keeps per object are used by one render at a time (`_rendering`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

from prometheus_client import core as prometheus_client_core

from karpy.api import decoding, labels, quantity
from karpy.kube import resources as kube_resources
from karpy.runtime.metrics import nodelabels, offloop, textformat
from karpy.scheduling import resources
from karpy.state import cluster as state_cluster
from karpy.state import facts, statenode

MILLI_PER_UNIT: Final = 1000


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


def _created(obj: Mapping[str, Any]) -> float | None:
    value = facts.metadata(obj).get("creationTimestamp")
    if isinstance(value, int | float):
        return float(value)
    return decoding.timestamp_or_none(value)


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        _mapping(c).get("type") == "Ready" and _mapping(c).get("status") == "True"
        for c in _mapping(pod.get("status")).get("conditions") or ()
    )


def _pod_sum(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Σ of pods' requests or limits, without the pod slot karpy counts as a request (upstream's sums have none)."""
    total = resources.add(*maps)
    total.pop(labels.RESOURCE_PODS, None)
    return total


def _value(name: str, milli: int) -> float:
    """A quantity as upstream reports it: cores for cpu, else the integer `Quantity.Value()` (rounded up)."""
    if name == labels.RESOURCE_CPU:
        return milli / MILLI_PER_UNIT
    return float(-(-milli // MILLI_PER_UNIT))


@dataclasses.dataclass(frozen=True, slots=True)
class _PodFacts:
    node_name: str
    terminal: bool
    ready: bool


class PodTimes(Protocol):
    """The provisioner's instants per pod key (`provisioning.podtimes.PodTimes`)."""

    def seen_at(self, key: str) -> float | None: ...
    def decided_at(self, key: str) -> float | None: ...
    def schedulable_since(self, key: str) -> float | None: ...
    def frozen(self) -> PodTimes:
        """A copy the provisioner does not change, for a render off the loop."""
        ...


class _NoTimes:
    def seen_at(self, key: str) -> float | None:
        return None

    def decided_at(self, key: str) -> float | None:
        return None

    def schedulable_since(self, key: str) -> float | None:
        return None

    def frozen(self) -> PodTimes:
        return self


class NodeSeriesCollector(offloop.DeferringCollector):
    def __init__(
        self, cluster: state_cluster.Cluster, *, now: Callable[[], float], pod_times: PodTimes | None = None
    ) -> None:
        self._cluster = cluster
        self._now = now
        self._times: PodTimes = pod_times or _NoTimes()
        self._unsynced_since: float | None = None
        self._node_labels: nodelabels.PerObject[nodelabels.Rendered] = nodelabels.PerObject()
        self._pod_labels: nodelabels.PerObject[nodelabels.Rendered] = nodelabels.PerObject()
        self._pod_facts: nodelabels.PerObject[_PodFacts] = nodelabels.PerObject()
        self._rendering = threading.Lock()

    def _family(self, name: str, doc: str, names: Iterable[str] = ()) -> prometheus_client_core.GaugeMetricFamily:
        return prometheus_client_core.GaugeMetricFamily(name, doc, labels=list(names))

    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        now = self._now()
        synced = list(self._synced(now))
        nodes = [n for n in reads.state_nodes(self._cluster) if n.node is not None]
        pods = self._cluster.objects(kube_resources.PODS)
        times = self._times.frozen()
        return functools.partial(self._render, synced, nodes, pods, times, now)

    def _render(
        self,
        synced: list[prometheus_client_core.Metric],
        nodes: list[statenode.StateNode],
        pods: list[Mapping[str, Any]],
        times: PodTimes,
        now: float,
    ) -> list[prometheus_client_core.Metric]:
        with self._rendering:
            out = [*synced, *self._nodes(nodes, now)]
            by_name = {n.node_name: n.node for n in nodes if n.node is not None}
            # the facts are kept per pod: a list of them, not of (pod, facts) pairs, adds nothing long-lived
            found = [self._facts(p) for p in pods]
            out.append(self._pod_state(zip(pods, found, strict=True), by_name))
            out.extend(self._pods([p for p, f in zip(pods, found, strict=True) if not f.terminal], now, times))
            for cache in (self._node_labels, self._pod_labels, self._pod_facts):
                cache.scraped()
            return out

    def _facts(self, pod: Mapping[str, Any]) -> _PodFacts:
        """What the pod gauges read of a pod, kept while the pod does not change."""

        def build() -> _PodFacts:
            found = facts.pod_facts(pod)
            return _PodFacts(node_name=found.node_name, terminal=found.terminal, ready=_ready(pod))

        return self._pod_facts.get(pod, None, build)

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

    def _nodes(self, nodes: Iterable[statenode.StateNode], now: float) -> Iterator[prometheus_client_core.Metric]:
        families = {
            name: textformat.RenderedGauge(f"karpenter_nodes_{name}", doc, added=nodelabels.RESOURCE_TYPE)
            for name, doc in (
                ("allocatable", "Node allocatable are the resources allocatable by nodes."),
                ("total_pod_requests", "Sum of the requests of the pods bound to the node, DaemonSet pods included"),
                ("system_overhead", "Node capacity minus allocatable, by resource"),
                ("total_daemon_requests", "Sum of the requests of the node's DaemonSet pods"),
                ("total_pod_limits", "Sum of the limits of the pods bound to the node, DaemonSet pods included"),
                ("total_daemon_limits", "Sum of the limits of the node's DaemonSet pods"),
            )
        }
        lifetime = textformat.RenderedGauge(
            "karpenter_nodes_current_lifetime_seconds", "Seconds since the node was created"
        )
        allocatable: dict[str, int] = {}
        requested: dict[str, int] = {}
        for n in nodes:
            assert n.node is not None
            status = _mapping(n.node.get("status"))
            capacity, node_allocatable = _quantities(status.get("capacity")), _quantities(status.get("allocatable"))
            node, managed = n.node, n.nodeclaim is not None
            node_labels = self._node_labels.get(
                node, managed, functools.partial(nodelabels.rendered_node, node, managed=managed)
            )
            daemons = [p for p in n.pods if p.is_daemon]
            for name, amounts in (
                ("allocatable", node_allocatable),
                ("system_overhead", {k: v - node_allocatable.get(k, 0) for k, v in capacity.items()}),
                ("total_pod_requests", _pod_sum(p.requests for p in n.pods)),
                ("total_daemon_requests", _pod_sum(p.requests for p in daemons)),
                ("total_pod_limits", _pod_sum(p.limits for p in n.pods)),
                ("total_daemon_limits", _pod_sum(p.limits for p in daemons)),
            ):
                family = families[name]
                for resource, milli in sorted(amounts.items()):
                    name = resource_type(resource)
                    text = node_labels.with_resource(name)
                    family.add_rendered(node_labels.labels, text, _value(resource, milli), added=name)
            created = _created(n.node)
            if created is not None:
                lifetime.add_rendered(node_labels.labels, node_labels.text, max(0.0, now - created))
            allocatable = resources.add(allocatable, n.allocatable)
            requested = resources.add(requested, *(p.requests for p in n.pods))
        yield from families.values()
        yield lifetime
        utilization = self._family(
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            ("resource_type",),
        )
        for name, total in sorted(allocatable.items()):
            if total > 0:
                utilization.add_metric([resource_type(name)], 100.0 * requested.get(name, 0) / total)
        yield utilization

    def _pod_state(
        self, pods: Iterable[tuple[Mapping[str, Any], _PodFacts]], nodes: Mapping[str, Mapping[str, Any]]
    ) -> prometheus_client_core.Metric:
        """`karpenter_pods_state`: 1 per pod, terminal ones included, labelled as upstream's pod controller does."""
        family = textformat.RenderedGauge(
            "karpenter_pods_state",
            "Pod state is the current state of pods, labelled by the pod's name, namespace, owner, node, NodePool, "
            "zone, architecture, capacity type, instance type, phase and readiness",
        )
        for pod, found in pods:
            node = nodes.get(found.node_name)
            ready = found.ready
            rendered = self._pod_labels.get(
                pod, node, functools.partial(nodelabels.rendered_pod, pod, node, ready=ready)
            )
            family.add_rendered(rendered.labels, rendered.text, 1.0)
        return family

    def _pods(
        self, pods: Iterable[Mapping[str, Any]], now: float, times: PodTimes
    ) -> Iterator[prometheus_client_core.Metric]:
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
