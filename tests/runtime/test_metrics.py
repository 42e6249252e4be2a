"""Metrics: cost per NodePool from offering prices, state gauges at scrape time, hooks, the HTTP servers."""

from __future__ import annotations

import aiohttp
import prometheus_client.parser
import pytest
from tests import builders

from karpy import clock
from karpy.api import labels
from karpy.cloudprovider import types
from karpy.kube import client, resources
from karpy.runtime import metrics, servers
from karpy.runtime.metrics import cloudprovider as metrics_cloudprovider
from karpy.runtime.metrics import cluster as metrics_cluster
from karpy.state import cluster as state_cluster

PRICES = {("m5.large", "us-east-1a", "on-demand"): 0.096, ("m5.large", "us-east-1a", "spot"): 0.035}


def _labels(pool: str, instance_type: str = "m5.large", capacity: str = "on-demand") -> dict[str, str]:
    """A node's labels: of `pool` ("": unmanaged), `instance_type` bought as `capacity` in us-east-1a."""
    return {
        labels.LABEL_NODEPOOL: pool,
        labels.LABEL_INSTANCE_TYPE: instance_type,
        labels.LABEL_ZONE: "us-east-1a",
        labels.LABEL_CAPACITY_TYPE: capacity,
    }


WEB = builders.parsed_state_node("a", labels=_labels("web"), cpu="2")
WEB_SPOT = builders.parsed_state_node("b", labels=_labels("web", capacity="spot"), cpu="2")


def lookup(instance_type: str, zone: str, capacity_type: str) -> float | None:
    return PRICES.get((instance_type, zone, capacity_type))


def test_nodepool_costs_sum_offering_prices_per_pool() -> None:
    nodes = [
        WEB,
        WEB_SPOT,
        builders.parsed_state_node("c", labels=_labels("batch"), cpu="2"),
        builders.parsed_state_node("u", labels=_labels(""), cpu="2"),
    ]
    costs = metrics_cluster.nodepool_costs(nodes, lookup)
    assert costs == {"web": pytest.approx(0.096 + 0.035), "batch": pytest.approx(0.096)}  # unmanaged node ignored


def test_unpriced_nodes_count_zero_but_keep_their_pool() -> None:
    unpriced = builders.parsed_state_node("a", labels=_labels("web", instance_type="x9.huge"), cpu="2")
    assert metrics_cluster.nodepool_costs([unpriced], lookup) == {"web": 0.0}


def test_price_book_reads_offerings() -> None:
    book = metrics_cloudprovider.PriceBook()
    offering = types.Offering(zone="us-east-1b", capacity_type="spot", price=0.5)
    book.update([types.InstanceType(name="c5.xlarge", labels={}, capacity={}, offerings=(offering,))])
    assert book.price("c5.xlarge", "us-east-1b", "spot") == 0.5
    assert book.price("c5.xlarge", "us-east-1b", "on-demand") is None


def _cluster_of(*names_and_capacities: tuple[str, str]) -> state_cluster.Cluster:
    """The state cache, listed, holding one web Node per (name, capacity type), priced as `PRICES` says."""
    state = state_cluster.Cluster(clock=clock.ManualClock(0.0))
    state.mark_listed(resources.NODES)
    for name, capacity in names_and_capacities:
        node = builders.node(name, labels=_labels("web", capacity=capacity), cpu="2")
        state.apply(resources.NODES, client.WatchEvent(client.ADDED, node))
    return state


def samples(m: metrics.Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in prometheus_client.parser.text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_registry_is_private_and_exposes_upstream_names_and_costs() -> None:
    m = metrics.Metrics()
    m.watch_state(_cluster_of(("a", "on-demand"), ("b", "spot")))
    m.prices.update(
        [
            types.InstanceType(
                name="m5.large",
                labels={},
                capacity={},
                offerings=tuple(types.Offering(zone=z, capacity_type=c, price=p) for (_, z, c), p in PRICES.items()),
            )
        ]
    )
    m.nodeclaim_created("web")
    m.disruption_decision("delete", "Empty")
    hooks = m.interruption_hooks()
    hooks.received("SpotInterruption")
    hooks.deleted("SpotInterruption")
    m.provisioner_hooks().scheduling_duration(0.2)
    got = samples(m)
    created = (
        "karpenter_nodeclaims_created_total",
        (("min_values_relaxed", "false"), ("nodepool", "web"), ("reason", "provisioning")),
    )
    assert got[created] == 1
    key = (("consolidation_type", ""), ("decision", "delete"), ("reason", "Empty"))
    assert got[("karpenter_voluntary_disruption_decisions_total", key)] == 1
    assert got[("karpenter_interruption_received_messages_total", (("message_type", "spot_interrupted"),))] == 1
    assert got[("karpenter_interruption_deleted_messages_total", ())] == 1
    assert got[("karpenter_scheduler_scheduling_duration_seconds_count", (("controller", "provisioner"),))] == 1
    assert got[("karpy_nodepool_cost_per_hour", (("nodepool", "web"),))] == pytest.approx(0.096 + 0.035)
    # a fresh Metrics shares nothing with the first (no process-global registry)
    assert created not in samples(metrics.Metrics())


async def _exposition() -> bytes:
    return b"x_total 1\n"


async def test_servers_answer_on_random_local_ports() -> None:
    ok = {"always": lambda: True}
    broken = {"informers": lambda: False, "boom": lambda: 1 / 0 == 0}
    async with (
        servers.serving(servers.metrics_app(_exposition), host="127.0.0.1", port=0) as mport,
        servers.serving(servers.health_app(ok), host="127.0.0.1", port=0) as ok_port,
        servers.serving(servers.health_app(broken), host="127.0.0.1", port=0) as bad_port,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"http://127.0.0.1:{mport}/metrics") as r:
            assert (r.status, await r.text()) == (200, "x_total 1\n")
        async with http.get(f"http://127.0.0.1:{ok_port}/readyz") as r:
            assert r.status == 200
        async with http.get(f"http://127.0.0.1:{bad_port}/readyz") as r:
            body = await r.text()
            assert r.status == 503
            assert "[-]informers failed" in body
            assert "[-]boom failed" in body
        async with http.get(f"http://127.0.0.1:{bad_port}/healthz") as r:
            assert r.status == 200  # liveness is not readiness


def test_lifecycle_disruption_and_interruption_hooks_feed_upstream_names() -> None:
    m = metrics.Metrics()
    m.nodeclaim_terminated("web", "spot", "us-east-1a")
    m.node_created("web")
    m.node_created("web")
    m.node_terminated("web")
    disruption = m.disruption_hooks()
    # the disruption controller calls (method, reason, decision); upstream labels are decision/reason/type
    disruption.decision("multi-node-consolidation", "Underutilized", "replace")
    disruption.decision("emptiness", "Empty", "delete")
    disruption.decision("drift", "Drifted", "replace")
    disruption.eligible_nodes("Underutilized", 4)
    disruption.eligible_nodes("Underutilized", 3)  # a gauge: the last pass wins
    interruption = m.interruption_hooks()
    interruption.failed("SpotInterruption")
    interruption.dropped("not_json")
    interruption.dropped("not_json")
    interruption.dropped("malformed")
    got = samples(m)
    terminated = (("capacity_type", "spot"), ("nodepool", "web"), ("zone", "us-east-1a"))
    assert got[("karpenter_nodeclaims_terminated_total", terminated)] == 1
    assert got[("karpenter_nodes_created_total", (("nodepool", "web"), ("zone", "")))] == 2
    assert got[("karpenter_nodes_terminated_total", (("nodepool", "web"), ("zone", "")))] == 1
    decisions = "karpenter_voluntary_disruption_decisions_total"
    assert got[(decisions, (("consolidation_type", "multi"), ("decision", "replace"), ("reason", "underutilized")))]
    assert got[(decisions, (("consolidation_type", "empty"), ("decision", "delete"), ("reason", "empty")))] == 1
    assert got[(decisions, (("consolidation_type", ""), ("decision", "replace"), ("reason", "drifted")))] == 1
    eligible = ("karpenter_voluntary_disruption_eligible_nodes", (("reason", "underutilized"),))
    assert got[eligible] == 3
    assert got[("karpy_interruption_failed_messages_total", (("message_type", "spot_interrupted"),))] == 1
    dropped = "karpy_interruption_messages_dropped_total"
    assert got[(dropped, (("reason", "not_json"),))] == 2
    assert got[(dropped, (("reason", "malformed"),))] == 1


def test_drift_and_expiry_hooks() -> None:
    m = metrics.Metrics()
    m.drift_hooks().drifted("NodePoolDrifted", "web")
    m.expiry_hooks().disrupted("Expired", "web", "spot", termination_mode="graceful")
    got = samples(m)
    assert got[("karpy_nodeclaims_drifted_total", (("nodepool", "web"), ("type", "NodePoolDrifted")))] == 1
    disrupted = (
        ("capacity_type", "spot"), ("consolidation_policy", ""), ("nodepool", "web"), ("reason", "expired"),
        ("termination_mode", "graceful"),
    )  # fmt: skip
    assert got[("karpenter_nodeclaims_disrupted_total", disrupted)] == 1


DISRUPTED = "karpenter_nodeclaims_disrupted_total"
CREATED = "karpenter_nodeclaims_created_total"


def disrupted(
    reason: str, pool: str = "web", capacity_type: str = "spot", mode: str = ""
) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (
        DISRUPTED,
        (
            ("capacity_type", capacity_type), ("consolidation_policy", ""), ("nodepool", pool), ("reason", reason),
            ("termination_mode", mode),
        ),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("Empty", "empty"),
        ("Drifted", "drifted"),
        ("Underutilized", "underutilized"),
        ("Expired", "expired"),
        ("InsufficientCapacity", "insufficient_capacity"),
        ("launch_timeout", "launch_timeout"),  # already an upstream label value: unchanged
    ],
)
def test_disruption_reasons_become_upstream_snake_case_labels(reason: str, label: str) -> None:
    m = metrics.Metrics()
    m.nodeclaim_disrupted(reason, "web", "spot")
    assert samples(m)[disrupted(label)] == 1


def test_replacements_count_as_created_under_the_disruption_reason() -> None:
    m = metrics.Metrics()
    m.lifecycle.replacement_created("web", "Underutilized", True)
    m.nodeclaim_created("web")
    got = samples(m)
    assert got[(CREATED, (("min_values_relaxed", "true"), ("nodepool", "web"), ("reason", "underutilized")))] == 1
    assert got[(CREATED, (("min_values_relaxed", "false"), ("nodepool", "web"), ("reason", "provisioning")))] == 1


@pytest.mark.parametrize(
    ("kind", "label"),
    [
        ("SpotInterruption", "spot_interrupted"),
        ("ScheduledChange", "scheduled_change"),
        ("InstanceStopped", "instance_stopped"),
        ("InstanceTerminated", "instance_terminated"),
        ("RebalanceRecommendation", "rebalance_recommendation"),
        ("CapacityReservationInterruption", "capacity_reservation_interruption"),
        ("SystemStatus", "system_status"),
    ],
)
def test_interruption_deletions_count_as_disrupted_with_upstream_kind(kind: str, label: str) -> None:
    m = metrics.Metrics()
    hooks = m.interruption_hooks()
    hooks.disrupted(kind, "web", "spot")
    hooks.action("CordonAndDrain", kind)
    got = samples(m)
    assert got[disrupted(label)] == 1
    actions = (("action_type", "CordonAndDrain"), ("message_type", label))
    assert got[("karpy_interruption_actions_performed_total", actions)] == 1


def test_every_reconciler_hook_that_deletes_a_claim_feeds_the_disrupted_counter() -> None:
    m = metrics.Metrics()
    m.expiry_hooks().disrupted("Expired", "web", "spot")
    m.nodeclaim_hooks().disrupted("registration_timeout", "web", "spot")
    m.interruption_hooks().disrupted("InstanceStopped", "web", "spot")
    got = samples(m)
    assert [got[disrupted(r)] for r in ("expired", "registration_timeout", "instance_stopped")] == [1, 1, 1]


def test_failed_creates_are_wired_into_the_provisioner_hooks() -> None:
    m = metrics.Metrics()
    hooks = m.provisioner_hooks()
    hooks.nodeclaim_create_failed("web", "limits_exceeded")
    hooks.nodeclaim_create_failed("web", "limits_exceeded")
    hooks.nodeclaim_create_failed("web", "api_error")
    got = samples(m)
    failed = "karpy_nodeclaims_create_failed_total"
    assert got[(failed, (("nodepool", "web"), ("reason", "limits_exceeded")))] == 2
    assert got[(failed, (("nodepool", "web"), ("reason", "api_error")))] == 1


def test_rejected_objects_are_counted_by_kind_and_reason() -> None:
    m = metrics.Metrics()
    hooks = m.rejection_hooks()
    hooks.rejected("Pod", "invalid")
    hooks.rejected("Pod", "invalid")
    hooks.rejected("NodeClaim", "handling_failed")
    got = samples(m)
    assert got[("karpy_objects_rejected_total", (("kind", "Pod"), ("reason", "invalid")))] == 2
    assert got[("karpy_objects_rejected_total", (("kind", "NodeClaim"), ("reason", "handling_failed")))] == 1
