"""The reconcilers driven with the operator's real hooks: each counter is read back from the registry, so a hook
that stops being wired (or called) fails here, not only in a scrape on a live cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import prometheus_client.parser
import pytest
from tests import builders
from tests.disruption import world as disruption_world
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness
from tests.provisioning import builders as provisioning_builders
from tests.runtime import exporting
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections
from karpy import settings as karpy_settings
from karpy.api import labels
from karpy.clock import ManualClock
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client as kube_client
from karpy.kube import fake as kube_fake
from karpy.kube import resources
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclaim import lifecycle_observer
from karpy.provisioning import provisioner
from karpy.runtime import metrics
from karpy.scheduling import results, scheduler
from karpy.state import cluster as state_cluster

CREATED = "karpenter_nodeclaims_created_total"
CREATE_FAILED = "karpy_nodeclaims_create_failed_total"
DISRUPTED = "karpenter_nodeclaims_disrupted_total"


def counter(m: metrics.Metrics, name: str, **label_values: str) -> float:
    for family in prometheus_client.parser.text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            if s.name == name and s.labels == label_values:
                return float(s.value)
    return 0.0


def _provisioner(
    m: metrics.Metrics,
    cluster: state_cluster.Cluster,
    client: kube_fake.FakeKubeClient,
    *,
    settings: provisioner.Settings | None = None,
    solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve,
) -> provisioner.Provisioner:
    return provisioner.Provisioner(
        provisioner.Deps(
            client=client,
            cluster=cluster,
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=ManualClock(0.0),
            recorder=events.MemoryRecorder(),
            rejections=rejections.Discard(),
            metrics=m.provisioner_hooks(),
            settings=settings or provisioner.Settings(),
            solver=solver,
        )
    )


def _web(*pending: dict[str, Any], limits: Mapping[str, str] | None = None) -> state_cluster.Cluster:
    pool = builders.nodepool("web", requirements=[], **({"limits": dict(limits)} if limits else {}))
    return provisioning_builders.state(ManualClock(0.0), pools=[pool], pending=pending)


async def test_provisioner_counts_created_refused_and_failed_nodeclaims() -> None:
    m, client = metrics.Metrics(), kube_fake.FakeKubeClient(ManualClock(0.0))
    await _provisioner(m, _web(builders.pod("a", cpu="1", memory="1Gi")), client).provision()
    assert counter(m, CREATED, nodepool="web", reason="provisioning", min_values_relaxed="false") == 1

    full = _web(builders.pod("b", cpu="1", memory="1Gi"), limits={"cpu": "1"})
    used = builders.nodeclaim("used", pool="web", provider_id="fake:///used", capacity={"cpu": "2", "pods": "0"})

    def solve_then_the_pool_is_used(inp: scheduler.SchedulingInput) -> results.Results:
        plan = scheduler.solve(inp)
        full.apply(resources.NODECLAIMS, kube_client.WatchEvent(kube_client.ADDED, used))  # created meanwhile
        return plan

    await _provisioner(m, full, client, solver=solve_then_the_pool_is_used).provision()
    assert counter(m, CREATE_FAILED, nodepool="web", reason=provisioner.LIMITS_EXCEEDED) == 1

    client.next_create_error = kube_client.KubeError(500, "InternalError", "injected")
    await _provisioner(m, _web(builders.pod("c", cpu="1", memory="1Gi")), client).provision()
    assert counter(m, CREATE_FAILED, nodepool="web", reason=provisioner.API_ERROR) == 1
    created = counter(m, CREATED, nodepool="web", reason="provisioning", min_values_relaxed="false")
    assert created == 1  # failures are not creations


@pytest.mark.parametrize(
    ("policy", "relaxed"),
    [(karpy_settings.MinValuesPolicy.BEST_EFFORT, "true"), (karpy_settings.MinValuesPolicy.STRICT, "")],
)
async def test_a_claim_whose_min_values_were_relaxed_counts_as_such(
    policy: karpy_settings.MinValuesPolicy, relaxed: str
) -> None:
    """More instance types asked for (minValues 20) than the catalog's 8: BestEffort relaxes it and says so on the
    NodeClaim and in the counter (core: scheduling/scheduler.go, provisioner.go `Create`); Strict creates nothing."""
    m, client = metrics.Metrics(), kube_fake.FakeKubeClient(ManualClock(0.0))
    wide = builders.requirement(labels.LABEL_INSTANCE_TYPE, "Exists", min_values=20)
    pool = builders.nodepool("web", requirements=[wide])
    settings = provisioner.Settings(scheduling=karpy_settings.SchedulingSettings(min_values_policy=policy))
    cluster = provisioning_builders.state(
        ManualClock(0.0), pools=[pool], pending=[builders.pod("a", cpu="1", memory="1Gi")]
    )
    await _provisioner(m, cluster, client, settings=settings).provision()
    claims = client.all(resources.NODECLAIMS)
    annotations = [
        c["metadata"].get("annotations", {}).get(labels.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED) for c in claims
    ]
    assert annotations == ([relaxed] if relaxed else [])
    assert counter(m, CREATED, nodepool="web", reason="provisioning", min_values_relaxed="true") == (
        1 if relaxed else 0
    )


async def test_a_claim_deleted_for_insufficient_capacity_counts_as_disrupted() -> None:
    m, env = metrics.Metrics(), harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict("web-abc12", pool="web"))
    env.cloud.next_error = cloudprovider_errors.InsufficientCapacity("no capacity")
    deps = dataclasses.replace(env.deps, observer=lifecycle_observer.Observer(env.recorder, m.nodeclaim_hooks()))
    await nodeclaim_controller.NodeClaimController(deps).reconcile("web-abc12")
    deleted = env.claim_obj("web-abc12")
    assert deleted is None or deleted["metadata"].get("deletionTimestamp")
    labels = {
        "reason": "insufficient_capacity", "nodepool": "web", "capacity_type": "",  # not launched: no type
        "consolidation_policy": "", "termination_mode": "graceful",
    }  # fmt: skip
    assert counter(m, "karpenter_nodeclaims_disrupted_total", **labels) == 1


def _total(m: metrics.Metrics, name: str, **label_values: str) -> float:
    """The sum over every series of `name` whose labels include `label_values`."""
    return sum(
        float(s.value)
        for family in prometheus_client.parser.text_string_to_metric_families(m.exposition().decode())
        for s in family.samples
        if s.name == name and label_values.items() <= s.labels.items()
    )


async def test_disruption_counts_its_replacements_and_the_nodeclaims_it_deletes() -> None:
    m = metrics.Metrics()
    w = disruption_world.World()
    w.pool()
    w.node("a", conditions=("Drifted",))
    w.pod("p1", "a", cpu="3")
    ctrl = w.controller(metrics=m.disruption_hooks())
    assert await w.reconcile(ctrl) is not None
    assert counter(m, CREATED, nodepool="default", reason="drifted", min_values_relaxed="false") == 1
    assert _total(m, DISRUPTED, reason="drifted") == 0  # not before its replacement is ready
    (replacement,) = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] != "a"]
    w.kube.objects[("nodeclaims", "", replacement["metadata"]["name"])]["status"] = {
        "conditions": [disruption_world.cond("Initialized")]
    }
    await ctrl.queue.reconcile()
    assert w.deleting("a")
    assert _total(m, DISRUPTED, reason="drifted", nodepool="default") == 1


ELIGIBLE = "karpenter_voluntary_disruption_eligible_nodes"


@pytest.mark.parametrize(
    ("drifted", "expected"),
    [
        # emptiness (none empty), static drift (none static), drift acts on the drifted node: the pass ends there
        (True, {"empty": 0.0, "drifted": 1.0}),
        # nothing empty or drifted: both consolidations are tried, over the two consolidatable nodes
        (False, {"empty": 0.0, "drifted": 0.0, "underutilized": 2.0}),
    ],
)
async def test_eligible_nodes_are_each_tried_methods_candidates_by_reason(
    drifted: bool, expected: dict[str, float]
) -> None:
    m = metrics.Metrics()
    w = disruption_world.World()
    w.pool()
    w.node("a")
    w.pod("p1", "a", cpu="3")
    w.node("b", conditions=("Consolidatable", "Drifted") if drifted else ("Consolidatable",))
    w.pod("p2", "b", cpu="3")
    w.node("c", conditions=())  # not consolidatable (its pods changed lately), not drifted: no method's candidate
    w.pod("p3", "c", cpu="3")
    await w.reconcile(w.controller(metrics=m.disruption_hooks()))
    got = {dict(k)["reason"]: v for k, v in exporting.samples(m, ELIGIBLE).items()}
    assert got == expected
