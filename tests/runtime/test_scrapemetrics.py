"""Scrape-time series from the state cache: disruption budgets per NodePool and reason, and the instance-type gauges
of the last catalog listing (the status-condition gauges: test_operator_series)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests import builders
from tests.runtime import test_metrics

from karpy import clock
from karpy.cloudprovider import types
from karpy.kube import client, resources
from karpy.runtime import metrics
from karpy.state import cluster

START = 1_700_000_000.0
SINCE = "2023-11-14T22:03:20Z"  # START - 600 s


def condition(type_: str, status: str = "True", reason: str = "Ok") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": SINCE}


def managed_node(state: cluster.Cluster, name: str, *, pool: str = "web", ready: bool = True) -> None:
    """A registered, initialized node of `pool` with its NodeClaim."""
    provider = f"aws:///us-east-1a/i-{name}"
    node_labels = {"karpenter.sh/nodepool": pool, "topology.kubernetes.io/zone": "us-east-1a"}
    claim = builders.nodeclaim(
        name, pool=pool, providerID=provider, nodeName=name,
        conditions=[condition("Registered"), condition("Initialized")],
    )  # fmt: skip
    node = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels},
        "spec": {"providerID": provider},
        "status": {"allocatable": {"cpu": "2"}, "conditions": [condition("Ready", "True" if ready else "False")]},
    }  # fmt: skip
    state.apply(resources.NODECLAIMS, client.WatchEvent(client.ADDED, claim))
    state.apply(resources.NODES, client.WatchEvent(client.ADDED, node))


def scraped(state: cluster.Cluster, *, catalog: Sequence[types.InstanceType] = ()) -> dict[tuple[str, Any], float]:
    m = metrics.Metrics()
    m.watch_cluster_series(state, now=lambda: START)
    m.instance_types_listed(catalog)
    return test_metrics.samples(m)


def test_allowed_disruptions_and_nodes_consuming_budgets_per_pool_and_reason() -> None:
    state = cluster.Cluster(clock=clock.ManualClock(START))
    budgets = [{"nodes": "50%"}, {"nodes": "0", "reasons": ["Drifted"]}]
    pool = builders.nodepool("web", disruption={"consolidateAfter": "0s", "budgets": budgets})
    state.apply(resources.NODEPOOLS, client.WatchEvent(client.ADDED, pool))
    for name in ("a", "b", "c"):
        managed_node(state, name)
    managed_node(state, "d", ready=False)  # NotReady: it uses up budget (core: BuildDisruptionBudgetMapping)
    got = scraped(state)

    def allowed(reason: str) -> float:
        return got[("karpenter_nodepools_allowed_disruptions", (("nodepool", "web"), ("reason", reason)))]

    assert [allowed(r) for r in ("Underutilized", "Empty", "Drifted")] == [2, 2, 0]  # ceil(50 % of 4), and 0
    consuming = got[("karpenter_nodepools_nodes_consuming_budgets", (("nodepool", "web"), ("reason", "Empty")))]
    assert consuming == 1


def test_instance_type_gauges_follow_the_last_listing() -> None:
    offerings = (
        types.Offering(zone="us-east-1a", capacity_type="spot", price=0.035),
        types.Offering(zone="us-east-1b", capacity_type="spot", price=0.04, available=False),
    )
    m5 = types.InstanceType(
        name="m5.large", labels={}, capacity={"cpu": 2000, "memory": 8 * 1024**3 * 1000}, offerings=offerings
    )
    got = scraped(cluster.Cluster(clock=clock.ManualClock(START)), catalog=[m5])
    assert got[("karpenter_cloudprovider_instance_type_cpu_cores", (("instance_type", "m5.large"),))] == 2
    assert got[("karpenter_cloudprovider_instance_type_memory_bytes", (("instance_type", "m5.large"),))] == 8 * 1024**3
    a = (("capacity_type", "spot"), ("instance_type", "m5.large"), ("zone", "us-east-1a"))
    b = (("capacity_type", "spot"), ("instance_type", "m5.large"), ("zone", "us-east-1b"))
    assert got[("karpenter_cloudprovider_instance_type_offering_available", a)] == 1
    assert got[("karpenter_cloudprovider_instance_type_offering_available", b)] == 0
    assert got[("karpenter_cloudprovider_instance_type_offering_price_estimate", a)] == 0.035
