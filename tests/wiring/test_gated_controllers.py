"""Operator wiring of the gated controllers: NodeRepair starts node repair only when the provider has repair
policies (as upstream registers node.health), StaticCapacity starts the static pool queue, and both stay out of
the leader's loops and the event routing when their gate is off (upstream's defaults)."""

from __future__ import annotations

import prometheus_client.parser
import pytest

from karpy import clock, settings
from karpy.cloudprovider import overlay, types
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, credentials, resources, rest
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.runtime import leadership, parts, routing
from karpy.state import cluster as state_cluster
from karpy.wiring import graph

POLICY = types.RepairPolicy("Ready", "False", 1800.0)


def _controller(gates: str, *, policies: tuple[types.RepairPolicy, ...] = (POLICY,)) -> parts.Controller:
    fake = fake_provider.FakeCloudProvider()
    fake.repair = list(policies)

    def cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(provider=fake)

    env = {"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true", "FEATURE_GATES": gates}
    s = settings.Settings.from_env(env)
    inner = rest.RestClient(credentials.Credentials("http://127.0.0.1:1"), clock=clock.SystemClock())
    return graph.build(s, kube=inner, clock=clock.ManualClock(), cloud_factory=cloud, identity="x")


@pytest.mark.parametrize(
    ("gates", "policies", "running"),
    [
        ("", (POLICY,), False),
        ("NodeRepair=false", (POLICY,), False),
        ("NodeRepair=true", (POLICY,), True),
        ("NodeRepair=true", (), False),  # a provider without policies has nothing to repair
    ],
)
def test_node_repair_runs_only_behind_its_gate_and_with_policies(
    gates: str, policies: tuple[types.RepairPolicy, ...], running: bool
) -> None:
    ctrl = _controller(gates, policies=policies)
    assert (ctrl.repair is not None) is running
    assert ("node repair" in leadership.singletons(ctrl)) is running


@pytest.mark.parametrize(("gates", "running"), [("", False), ("StaticCapacity=true", True)])
async def test_static_pools_are_queued_only_behind_their_gate(gates: str, running: bool) -> None:
    ctrl = _controller(gates)
    assert (ctrl.static_pools is not None) is running
    assert (parts.STATIC_NODEPOOLS in ctrl.queues) is running
    pool = {"metadata": {"name": "static"}}
    routing.route(ctrl, resources.NODEPOOLS, client.ADDED, pool)
    claim = {"metadata": {"name": "static-x", "labels": {"karpenter.sh/nodepool": "static"}}}
    routing.route(ctrl, resources.NODECLAIMS, client.DELETED, claim)
    if running:
        assert ctrl.queue(parts.STATIC_NODEPOOLS)._queued == {"static"}


@pytest.mark.parametrize(("gates", "running"), [("", False), ("NodeOverlay=true", True)])
def test_node_overlays_are_watched_and_applied_only_behind_their_gate(gates: str, running: bool) -> None:
    """Upstream decorates the provider and registers the nodeoverlay controller only under the gate; without it
    the nodeoverlays CRD may be absent, so karpy does not watch it either."""
    ctrl = _controller(gates)
    assert (parts.NODEOVERLAYS in ctrl.queues) is running
    assert (resources.NODEOVERLAYS in leadership.informed(ctrl)) is running
    assert isinstance(ctrl.cloud.provider, overlay.OverlaidProvider) is running
    assert isinstance(ctrl.cloud.provider, (overlay.OverlaidProvider, fake_provider.FakeCloudProvider))
    leadership.resync(ctrl)
    if running:
        assert ctrl.queue(parts.NODEOVERLAYS)._queued == {nodeoverlay_controller.KEY}


@pytest.mark.parametrize(("gates", "running"), [("", False), ("CapacityBuffer=true", True)])
def test_capacity_buffers_are_watched_and_reconciled_only_behind_their_gate(gates: str, running: bool) -> None:
    """Upstream registers the capacitybuffer controller, and counts virtual pods, only under the gate; without it
    the capacitybuffers CRD may be absent, so karpy watches neither it nor PodTemplates."""
    ctrl = _controller(gates)
    assert (parts.CAPACITYBUFFERS in ctrl.queues) is running
    informed = leadership.informed(ctrl)
    assert (resources.CAPACITYBUFFERS in informed) is running
    assert (resources.PODTEMPLATES in informed) is running
    buffer = {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "warm", "namespace": "apps"},
        "spec": {
            "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
            "podTemplateRef": {"name": "pt"},
            "replicas": 1,
        },
    }
    ctrl.cluster.apply(resources.CAPACITYBUFFERS, client.WatchEvent(client.ADDED, buffer))
    if running:
        assert ctrl.queue(parts.CAPACITYBUFFERS)._queued == {"apps/warm"}
        ctrl.queue(parts.CAPACITYBUFFERS).clear()
        leadership.resync(ctrl)
        assert ctrl.queue(parts.CAPACITYBUFFERS)._queued == {"apps/warm"}


@pytest.mark.parametrize(("gates", "running"), [("", False), ("CapacityBuffer=true", True)])
def test_the_buffers_operator_series_exist_only_behind_their_gate(gates: str, running: bool) -> None:
    """Upstream runs the buffers' operatorpkg status controller only under the gate (core:
    pkg/controllers/controllers.go), so without it /metrics has no `operator_capacitybuffer_*` family at all, nor a
    buffer in the deprecated kind-less ones; with it a buffer's condition shows in both."""
    ctrl = _controller(gates)
    ready = {"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved"}
    buffer = {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "warm", "namespace": "apps"},
        "spec": {"podTemplateRef": {"name": "pt"}, "replicas": 1},
        "status": {"conditions": [{**ready, "message": "", "lastTransitionTime": "2023-11-14T22:13:20Z"}]},
    }
    ctrl.cluster.apply(resources.CAPACITYBUFFERS, client.WatchEvent(client.ADDED, buffer))
    exposed = list(prometheus_client.parser.text_string_to_metric_families(ctrl.metrics.exposition().decode()))
    buffer_families = {f.name for f in exposed if f.name.startswith("operator_capacitybuffer_")}
    if running:
        assert {f"operator_capacitybuffer_{n}" for n in _OPERATOR_FAMILIES} <= buffer_families
    else:
        assert buffer_families == set()
    where = {"namespace": "apps", "name": "warm", **ready}
    counted = [
        (s.name, s.labels.get("kind"))
        for f in exposed
        for s in f.samples
        if s.name in ("operator_capacitybuffer_status_condition_count", "operator_status_condition_count")
        and where.items() <= s.labels.items()
    ]
    expected = [
        ("operator_capacitybuffer_status_condition_count", None),
        ("operator_status_condition_count", "CapacityBuffer"),
    ]
    assert sorted(counted, key=str) == (sorted(expected, key=str) if running else [])


_OPERATOR_FAMILIES = (
    "status_condition_count",
    "status_condition_current_status_seconds",
    "status_condition_transition_seconds",
    "status_condition_transitions",
    "termination_current_time_seconds",
    "termination_duration_seconds",
)
"""operatorpkg's families of a kind (status/metrics.go), as the text parser names them (a counter without _total)."""
