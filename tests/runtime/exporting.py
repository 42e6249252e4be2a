"""Every series karpy exports, with its type, labels and buckets: a registry with every hook called once and every
scrape-time collector registered on a populated cluster (shared by the upstream-parity and dashboard tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import prometheus_client.parser
from tests import builders

from karpy import clock
from karpy.api import capacitybuffer, parse
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import accounting
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, resources
from karpy.runtime import metrics, workqueue
from karpy.runtime.metrics import nodelabels, operatorpkg, queues
from karpy.state import cluster

START = 1_700_000_000.0
NODE_LABELS = {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "topology.kubernetes.io/region": "us-east-1"}
"""Labels of the populated cluster's Node beside its NodeClaim's."""


def cluster_of_everything() -> cluster.Cluster:
    """A cluster with one of everything the scrape-time collectors read."""
    state = cluster.Cluster(clock=clock.ManualClock(START))
    ready = {"type": "Ready", "status": "True", "reason": "Ready", "message": ""}
    ready["lastTransitionTime"] = "2023-11-14T22:13:20Z"
    pool = builders.nodepool("web", limits={"cpu": "100"})
    pool["status"] = {"conditions": [ready]}
    node_labels = {
        "karpenter.sh/nodepool": "web", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "on-demand",
    }  # fmt: skip
    claim = builders.nodeclaim(
        "web-a", pool="web", providerID="aws:///us-east-1a/i-1", nodeName="n1", conditions=[ready],
        capacity={"cpu": "2"}, allocatable={"cpu": "2"},
    )  # fmt: skip
    claim["metadata"]["labels"] = dict(node_labels)
    # launched, of a type no listing priced: what karpenter_nodepools_cost_tracker_errors_total counts
    unpriced = builders.nodeclaim("web-b", pool="web", providerID="aws:///us-east-1a/i-2", capacity={"cpu": "2"})
    unpriced["metadata"]["labels"] = {**node_labels, "node.kubernetes.io/instance-type": "x9.unlisted"}
    # the Node carries every other well-known label too, so that each label of the node gauges is checked
    every_label = {**{key: "v" for key in nodelabels.UPSTREAM_WELL_KNOWN}, **NODE_LABELS, **node_labels}
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": every_label, "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {"allocatable": {"cpu": "1900m"}, "capacity": {"cpu": "2"}, "conditions": [ready],
                   "phase": "Running"},
    }  # fmt: skip
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-p", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"nodeName": "n1", "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]},
        "status": {"phase": "Running"},
    }  # fmt: skip
    daemon = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "d", "namespace": "kube-system", "uid": "u-d", "creationTimestamp": "2023-11-14T22:13:20Z",
            "ownerReferences": [{"kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": True}],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
            "requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip
    pending = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "q", "namespace": "default", "uid": "u-q", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }  # fmt: skip
    nodeclass = builders.ec2nodeclass("default")
    nodeclass["status"] = {"conditions": [ready]}
    for res, obj in (
        (resources.NODEPOOLS, pool), (resources.EC2NODECLASSES, nodeclass), (resources.NODECLAIMS, claim),
        (resources.NODECLAIMS, unpriced),
        (resources.NODES, node), (resources.PODS, pod), (resources.PODS, daemon), (resources.PODS, pending),
    ):  # fmt: skip
        state.apply(res, client.WatchEvent(client.ADDED, obj))
    return state


class _PodTimes:
    """The provisioner's instants for the populated cluster's pods: pending `q` seen and not decided on, `q` and
    the unready `p` placed half a minute after creation (the real record is tested in test_pod_provisioning_series)."""

    def seen_at(self, key: str) -> float | None:
        return START if key == "default/q" else None

    def decided_at(self, key: str) -> float | None:
        return None

    def schedulable_since(self, key: str) -> float | None:
        return START + 30 if key in ("default/q", "default/p") else None

    def frozen(self) -> _PodTimes:
        return self  # it changes nothing


def _drive_object_series(m: metrics.Metrics, state: cluster.Cluster) -> None:
    """operatorpkg's series of each kind: an object whose Ready condition turns True a minute in and which is then
    deleted (transitions, how long Unknown held, deletion duration), and one left being deleted (its gauge)."""
    state.add_listener(m.object_listener(now=lambda: START + 90, leading=lambda: True))
    # of no NodePool and with no allocatable, so that they change no other series
    makers: tuple[tuple[resources.Resource, Callable[[str], dict[str, Any]]], ...] = (
        (resources.NODECLAIMS, lambda name: builders.nodeclaim(name, pool="")),
        (resources.NODEPOOLS, builders.nodepool),
        (resources.NODES, lambda name: {**builders.node(name), "status": {}}),
        (resources.EC2NODECLASSES, builders.ec2nodeclass),
        (resources.CAPACITYBUFFERS, lambda name: {
            "apiVersion": capacitybuffer.API_VERSION, "kind": capacitybuffer.KIND,
            "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": 1},
            "status": {"conditions": [_ready("True", _AT_START)]},  # as the buffer controller writes it
        }),
    )  # fmt: skip
    for res, make in makers:
        unknown = make(f"{res.kind.lower()}-gone")
        unknown["status"] = {"conditions": [_ready("Unknown", _AT_START)]}
        ready = builders.deleting(unknown, at=_AT_START)
        ready["status"] = {"conditions": [_ready("True", _A_MINUTE_IN)]}
        state.apply(res, client.WatchEvent(client.ADDED, unknown))
        state.apply(res, client.WatchEvent(client.MODIFIED, ready))
        state.apply(res, client.WatchEvent(client.DELETED, ready))
        leaving = builders.deleting(make(f"{res.kind.lower()}-leaving"), at=_AT_START)
        state.apply(res, client.WatchEvent(client.ADDED, leaving))


_AT_START = "2023-11-14T22:13:20Z"
_A_MINUTE_IN = "2023-11-14T22:14:20Z"


def _ready(status: str, since: str) -> dict[str, str]:
    return builders.condition("Ready", status, reason="Reconciled", message="", lastTransitionTime=since)


async def _never(key: str) -> float | None:
    raise AssertionError(f"the exporting queue is never run ({key})")


def driven() -> metrics.Metrics:
    """A registry with every hook called once and every collector registered on a populated cluster."""
    m = metrics.Metrics()
    m.watch_objects(operatorpkg.CAPACITYBUFFERS)  # as the wiring does under the CapacityBuffer gate
    state = cluster_of_everything()
    m.watch_state(state)
    m.watch_cluster_series(state, now=lambda: START + 60, pod_times=_PodTimes())
    _drive_object_series(m, state)
    calls = accounting.ApiCalls()
    calls.record_batch("create_fleet", size=3, window_seconds=0.2)
    calls.record_launch_failure(zone="us-east-1a", zone_id="use1-az1", capacity_type="spot", reason="LaunchFailed")
    calls.record_termination_failure(zone="us-east-1a", zone_id="use1-az1")
    calls.record_userdata("default", 2012)
    m.watch_cloud_calls(calls)
    offering = types.Offering(zone="us-east-1a", capacity_type="on-demand", price=0.096)
    shape = {"cpu": 2000, "memory": 8 << 40}
    m.instance_types_listed([types.InstanceType(name="m5.large", labels={}, capacity=shape, offerings=(offering,))])
    m.nodeclaim_created("web")
    m.nodeclaim_create_failed("web", "limits_exceeded")
    m.nodeclaim_disrupted("Expired", "web", "spot")
    m.nodeclaim_terminated("web", "spot", "us-east-1a")
    m.node_created("web", "us-east-1a")
    m.node_terminated("web", "us-east-1a")
    m.disruption_decision("delete", "empty", "empty")
    m.drift_hooks().drifted("NodePoolDrifted", "web")
    m.repair_hooks().unhealthy_disrupted("Ready", "web", "spot", "ami-1")
    provider = m.metered(fake_provider.FakeCloudProvider(), "provisioner", clock=clock.ManualClock(START))
    asyncio.run(provider.list())
    failing = fake_provider.FakeCloudProvider()
    failing.next_error = cloudprovider_errors.InsufficientCapacity("none")
    claim = parse.nodeclaim(builders.nodeclaim("web-x", pool="web"))
    with contextlib.suppress(cloudprovider_errors.InsufficientCapacity):
        asyncio.run(m.metered(failing, "provisioner", clock=clock.ManualClock(START)).create(claim))
    claims = m.nodeclaim_hooks()
    claims.instance_terminated("web", 3.0)
    claims.terminated("web", 30.0)
    termination = m.termination_hooks()
    termination.node_released("web", 40.0, 7200.0)
    termination.node_drained("web")
    termination.eviction_requested("429")
    termination.pod_drained("Underutilized")
    disruption = m.disruption_hooks()
    disruption.eligible_nodes("Underutilized", 1)
    disruption.pool_decision("web", "emptiness", "Empty", "delete")
    disruption.evaluated("emptiness", "Empty", 0.1)
    disruption.failed_validation("single-node-consolidation", 1)
    disruption.queue_failed("drift", "Drifted", "replace", 1)
    disruption.consolidation_move("approved", "web", "Balanced")
    disruption.consolidation_score(1.5, "approved", "web", "Balanced")
    provisioner = m.provisioner_hooks()
    provisioner.scheduling_duration(0.1)
    provisioner.pods_unschedulable(0)
    provisioner.pods_ignored(1)
    provisioner.solve_started("id-1", 3, START)
    provisioner.pod_decided(0.5)
    provisioner.pending_by_effective_zone({"us-east-1a": 1, "flexible": 2})
    interruption = m.interruption_hooks()
    interruption.received("SpotInterruption")
    interruption.deleted("SpotInterruption")
    interruption.action("CordonAndDrain", "SpotInterruption")
    interruption.failed("SpotInterruption")
    interruption.dropped("not_json")
    interruption.latency(4.0)
    interruption.unhealthy("SystemStatus")
    series = queues.QueueSeries(m.registry)
    queue_hooks = series.hooks("nodeclaims")
    queue_hooks.added()
    queue_hooks.waited(0.01)
    queue_hooks.worked(0.2)
    queue_hooks.reconciled(workqueue.ERROR)
    queue_hooks.retried()
    queue = workqueue.WorkQueue("nodeclaims", _never, clock=clock.ManualClock(START))
    m.registry.register(queues.QueueCollector(lambda: {"nodeclaims": queue}, now=lambda: START))
    m.rejection_hooks().rejected("Pod", "invalid")
    m.set_leader(True)
    m.pod_bound(1.0)
    m.pod_started(2.0)
    m.pod_provisioning_bound(1.0)
    m.pod_provisioning_started(2.0)
    return m


def exported(m: metrics.Metrics) -> dict[str, dict[str, Any]]:
    """Series name (as scraped: counters with `_total`) -> type, label names and histogram buckets."""
    out: dict[str, dict[str, Any]] = {}
    families = list(prometheus_client.parser.text_string_to_metric_families(m.exposition().decode()))
    # prometheus_client adds an `<name>_created` gauge beside each counter, histogram and summary (the time it was
    # created, as OpenMetrics has it); upstream's Go client does not, and nothing reads them: not series of ours
    created = {f"{f.name}_created" for f in families if f.type in ("counter", "histogram", "summary")}
    for family in families:
        if family.name in created:
            continue
        name = f"{family.name}_total" if family.type == "counter" else family.name
        label_names: set[str] = set()
        buckets: list[float] = []
        for s in family.samples:
            label_names |= set(s.labels) - {"le", "quantile"}
            if s.name.endswith("_bucket") and s.labels["le"] != "+Inf":
                bound = float(s.labels["le"])
                if bound not in buckets:
                    buckets.append(bound)
        out[name] = {"type": family.type, "labels": label_names, "buckets": buckets, "samples": len(family.samples)}
    return out


def samples(m: metrics.Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample of `name` in a scrape of `m`, by its sorted (label, value) pairs."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in prometheus_client.parser.text_string_to_metric_families(m.exposition().decode())
        for s in family.samples
        if s.name == name
    }
