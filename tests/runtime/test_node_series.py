"""Upstream's node, cluster and pod gauges read back from a scrape of a populated state cache (core:
controllers/metrics/node/controller.go, metrics/pod/controller.go, metrics/nodepool/controller.go,
controllers/state/metrics.go)."""

from __future__ import annotations

import prometheus_client.parser
import pytest
from tests.runtime import exporting

from karpy import clock
from karpy.cloudprovider import types
from karpy.kube import resources
from karpy.runtime import metrics
from karpy.scheduling import pods
from karpy.state import cluster

NODE = {"node_name": "n1", "nodepool": "web", "managed": "true"}


def scraped(m: metrics.Metrics, series: str, label_values: dict[str, str]) -> float:
    """The value of the one sample whose labels include `label_values`, 0 when none does (pods are labelled `name`,
    so labels are not passed as keywords)."""
    found = [
        float(s.value)
        for family in prometheus_client.parser.text_string_to_metric_families(m.exposition().decode())
        for s in family.samples
        if s.name == series and label_values.items() <= s.labels.items()
    ]
    assert len(found) <= 1, f"{len(found)} samples of {series} match {label_values}"
    return found[0] if found else 0.0


@pytest.mark.parametrize(
    ("series", "label_values", "expected"),
    [
        ("karpenter_nodes_allocatable", {**NODE, "resource_type": "cpu"}, 1.9),  # the Node's status
        ("karpenter_nodes_total_pod_requests", {**NODE, "resource_type": "cpu"}, 1.1),  # 1 + the DaemonSet's 0.1
        ("karpenter_nodes_system_overhead", {**NODE, "resource_type": "cpu"}, 0.1),  # capacity 2, allocatable 1.9
        ("karpenter_nodes_total_daemon_requests", {**NODE, "resource_type": "cpu"}, 0.1),  # the DaemonSet pod only
        ("karpenter_nodes_total_pod_limits", {**NODE, "resource_type": "cpu"}, 2.2),  # 2 + the DaemonSet's 0.2
        ("karpenter_nodes_total_daemon_limits", {**NODE, "resource_type": "cpu"}, 0.2),
        ("karpenter_nodes_current_lifetime_seconds", NODE, 60.0),  # created at START, scraped a minute later
        ("karpenter_cluster_utilization_percent", {"resource_type": "cpu"}, 55.0),  # 1.1 of 2 cores requested
        ("karpenter_pods_unbound_time_seconds", {"name": "q", "namespace": "default"}, 60.0),
        ("karpenter_pods_unstarted_time_seconds", {"name": "p", "namespace": "default"}, 60.0),  # bound, not Ready
        ("karpenter_pods_unstarted_time_seconds", {"name": "d", "namespace": "kube-system"}, 0.0),  # Ready: absent
        ("karpenter_nodepools_cost_total", {"nodepool": "web"}, 0.096),  # one m5.large on demand
        ("karpenter_cluster_state_unsynced_time_seconds", {}, 0.0),  # every informer listed
    ],
)
def test_scrape_time_gauges(series: str, label_values: dict[str, str], expected: float) -> None:
    assert scraped(exporting.driven(), series, label_values) == pytest.approx(expected)


def test_unsynced_time_counts_from_the_first_scrape_that_saw_the_cache_unsynced() -> None:
    manual = clock.ManualClock(exporting.START)
    state = cluster.Cluster(clock=manual)
    m = metrics.Metrics()
    m.watch_cluster_series(state, now=manual.now)
    name = "karpenter_cluster_state_unsynced_time_seconds"
    assert scraped(m, name, {}) == 0.0
    manual.advance(30)
    assert scraped(m, name, {}) == 30.0
    state.mark_listed(resources.NODES)
    assert scraped(m, name, {}) == 0.0


def _container(name: str, cpu_limit: str, **fields: str) -> dict[str, object]:
    return {"name": name, "resources": {"limits": {"cpu": cpu_limit}}, **fields}


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        ({"containers": [_container("a", "1"), _container("b", "500m")]}, 1500),
        ({"containers": [_container("a", "1")], "initContainers": [_container("i", "3")]}, 3000),  # init peak
        (
            {"containers": [_container("a", "1")], "initContainers": [_container("s", "1", restartPolicy="Always")]},
            2000,  # a sidecar runs beside the containers
        ),
        ({"containers": [_container("a", "1")], "overhead": {"cpu": "250m", "memory": "1Gi"}}, 1250),
        ({"containers": [_container("a", "1")], "resources": {"limits": {"cpu": "4"}}}, 4000),  # pod-level
        ({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}, None),  # no limit
    ],
)
def test_a_pods_limits_are_summed_as_the_kubelet_does(spec: dict[str, object], cpu: int | None) -> None:
    parsed = pods.from_manifest({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    assert parsed.limits.get("cpu") == cpu
    assert "memory" not in parsed.limits  # overhead only adds to resources that have a limit


def test_an_unpriceable_node_counts_one_cost_tracking_error_while_it_stays_so() -> None:
    m = exporting.driven()  # web-b is launched as x9.unlisted, a type no listing priced
    errors = "karpenter_nodepools_cost_tracker_errors_total"
    assert exporting.samples(m, errors) == {(("nodepool", "web"),): 1.0}
    assert exporting.samples(m, errors) == {(("nodepool", "web"),): 1.0}  # a second scrape counts nothing new
    assert scraped(m, "karpenter_nodepools_cost_total", {"nodepool": "web"}) == pytest.approx(0.096)


def test_a_node_missing_an_offering_label_is_not_a_cost_tracking_error() -> None:
    state = cluster.Cluster(clock=clock.ManualClock(exporting.START))
    claim = exporting.builders.nodeclaim("web-c", pool="web", providerID="aws:///us-east-1a/i-3")
    state.apply(resources.NODECLAIMS, exporting.client.WatchEvent(exporting.client.ADDED, claim))
    m = metrics.Metrics()
    m.watch_state(state)
    offering = types.Offering(zone="us-east-1a", capacity_type="on-demand", price=0.096)
    m.instance_types_listed([types.InstanceType(name="m5.large", labels={}, capacity={}, offerings=(offering,))])
    assert exporting.samples(m, "karpenter_nodepools_cost_tracker_errors_total") == {}  # no instance-type label yet


def test_nothing_is_a_cost_tracking_error_before_the_first_listing() -> None:
    state = exporting.cluster_of_everything()
    m = metrics.Metrics()
    m.watch_state(state)
    assert exporting.samples(m, "karpenter_nodepools_cost_tracker_errors_total") == {}
