"""The kube-scheduler stand-in against the emulated API server: binds where pods fit, Unschedulable elsewhere; a
failed pod is tried again only after an event that may make it schedulable and its backoff, or after kube-scheduler's
5-minute wait, and its condition is written only when it changed (kube-scheduler's updatePod / UpdatePodCondition)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import scheduler as scheduling_scheduler
from karpy_emulator import fit_errors, node_facts, pod_conditions, scheduling_queue
from karpy_emulator import kube_scheduler as karpy_emulator_kube_scheduler
from karpy_emulator.apiserver import runner

NOW = 1_700_000_000.0


# The stand-in's nodes: Ready, 2 cpu and 4Gi unless told, with the kubelet's hostname label; pods request
# 500m unless told.
node = functools.partial(builders.node, cpu="2", memory="4Gi", ready=True, hostname=True)
pod = functools.partial(builders.pod, cpu="500m")


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        yield client


async def _pod(api: rest.RestClient, name: str) -> dict[str, Any]:
    got = await api.get(resources.PODS, name, namespace="default")
    assert got is not None
    return got


def _scheduled(p: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")


async def test_binds_fitting_pods_and_marks_the_rest_unschedulable(api: rest.RestClient) -> None:
    for body in (
        node("plain", cpu="1"),
        node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], labels={"gpu": "y"}),
        node("booting", cpu="64", ready=False),
        node("cordoned", cpu="64", unschedulable=True),
        node("soft", cpu="1", taints=[{"key": "spare", "effect": "PreferNoSchedule"}], labels={"soft": "y"}),
    ):
        await api.create(resources.NODES, body)
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    for body in (
        pod("small-1"),
        pod("small-2"),
        pod("small-3"),  # plain has 1 cpu: two 500m pods fit there
        pod("on-gpu", nodeSelector={"gpu": "y"}, tolerations=[toleration]),
        pod("gpu-intolerant", nodeSelector={"gpu": "y"}),
        pod("on-soft", nodeSelector={"soft": "y"}),  # PreferNoSchedule does not block
        pod("huge", cpu="32"),  # only the NotReady and the cordoned nodes are that big
        pod("other-scheduler", schedulerName="my-scheduler"),
    ):
        await api.create(resources.PODS, body)

    kube_scheduler = karpy_emulator_kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW))
    report = await kube_scheduler.sync()

    assert report.bound["default/on-gpu"] == "gpu"
    assert report.bound["default/on-soft"] == "soft"
    smalls = {k: v for k, v in report.bound.items() if k.startswith("default/small")}
    assert sorted(smalls.values()).count("plain") == 2  # plain holds exactly two 500m pods
    assert len(smalls) == 3  # the third went to the only other fitting node
    assert set(report.unschedulable) == {"default/gpu-intolerant", "default/huge"}
    assert "default/other-scheduler" not in report.bound
    assert "default/other-scheduler" not in report.unschedulable
    # gpu refuses for its taint, plain and soft lack the selector's label; the NotReady and cordoned nodes refuse
    # for the taints the node lifecycle controller gives them, as in kube-scheduler's own message.
    assert report.unschedulable["default/gpu-intolerant"] == (
        "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector,"
        " 1 node(s) had untolerated taint {dedicated: gpu},"
        " 1 node(s) had untolerated taint {node.kubernetes.io/not-ready},"
        " 1 node(s) had untolerated taint {node.kubernetes.io/unschedulable}."  # reasons sorted by text
    )
    for name, node_name in (("on-gpu", "gpu"), ("on-soft", "soft")):
        stored = await _pod(api, name)
        assert stored["spec"]["nodeName"] == node_name
        assert _scheduled(stored)["status"] == "True"
    huge = await _pod(api, "huge")
    assert "nodeName" not in huge["spec"]
    condition = _scheduled(huge)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == (
        "0/5 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu},"
        " 1 node(s) had untolerated taint {node.kubernetes.io/not-ready},"
        " 1 node(s) had untolerated taint {node.kubernetes.io/unschedulable}."
    )


async def test_unchanged_verdicts_write_nothing_and_new_capacity_binds(api: rest.RestClient) -> None:
    await api.create(resources.PODS, pod("big", cpu="3"))
    now = clock.ManualClock(NOW)
    kube_scheduler = karpy_emulator_kube_scheduler.KubeScheduler(api, clock=now)
    first = await kube_scheduler.sync()
    assert first.unschedulable["default/big"].startswith("0/0 nodes are available")
    version = (await _pod(api, "big"))["metadata"]["resourceVersion"]
    await kube_scheduler.sync()
    assert (await _pod(api, "big"))["metadata"]["resourceVersion"] == version  # no churn for the controller

    await api.create(resources.NODES, node("roomy", cpu="4"))
    await now.run_for(1)  # the pod's backoff after its first attempt
    third = await kube_scheduler.sync()
    assert third.bound == {"default/big": "roomy"}
    assert (await _pod(api, "big"))["spec"]["nodeName"] == "roomy"


async def test_many_pods_bind_concurrently_in_placement_batches(api: rest.RestClient) -> None:
    await api.create(resources.NODES, node("wide", cpu="64"))
    for i in range(40):
        await api.create(resources.PODS, pod(f"p{i}", cpu="1"))
    settings = karpy_emulator_kube_scheduler.SchedulerSettings(bind_concurrency=7)
    report = await karpy_emulator_kube_scheduler.KubeScheduler(
        api, clock=clock.ManualClock(NOW), settings=settings
    ).sync()
    assert report.bound == {f"default/p{i}": "wide" for i in range(40)}
    pods, _ = await api.list(resources.PODS, namespace="default")
    assert {p["spec"].get("nodeName") for p in pods} == {"wide"}


async def test_binds_and_condition_writes_share_the_clients_rate_limit(api: rest.RestClient) -> None:
    """kube-scheduler's client sends `qps` requests a second after a `burst` (clientConnection, defaults.go); a pass
    tries only as many pods as it has tokens for, the others wait for the tokens on the stand-in's clock."""
    await api.create(resources.NODES, node("wide", cpu="64"))
    for i in range(12):
        await api.create(resources.PODS, pod(f"p{i:02}", cpu="1"))
    for i in range(3):
        await api.create(resources.PODS, pod(f"z-huge-{i}", cpu="100"))  # tried last (the queue's order)
    now = clock.ManualClock(NOW)
    settings = karpy_emulator_kube_scheduler.SchedulerSettings(qps=2.0, burst=5)
    stand_in = karpy_emulator_kube_scheduler.KubeScheduler(api, clock=now, settings=settings)

    async def bound() -> int:
        pods, _ = await api.list(resources.PODS, namespace="default")
        return sum(1 for p in pods if p["spec"].get("nodeName"))

    assert len((await stand_in.sync()).bound) == 5  # the burst
    assert (await stand_in.sync()).bound == {}  # no token left: no pod tried, no request
    await now.run_for(1)
    assert len((await stand_in.sync()).bound) == 2  # 2 a second
    await now.run_for(10)
    assert len((await stand_in.sync()).bound) == 5  # refilled up to the burst, not beyond
    assert await bound() == 12
    await now.run_for(1.5)
    report = await stand_in.sync()
    assert len(report.unschedulable) == 3  # the condition writes take the same tokens
    assert report.bound == {}
    unlimited = karpy_emulator_kube_scheduler.SchedulerSettings(qps=None)
    await api.create(resources.NODES, node("huge", cpu="400"))
    report = await karpy_emulator_kube_scheduler.KubeScheduler(api, clock=now, settings=unlimited).sync()
    assert len(report.bound) == 3


async def test_a_not_ready_node_still_counts_as_a_spread_domain(api: rest.RestClient) -> None:
    zone = "topology.kubernetes.io/zone"
    await api.create(resources.NODES, node("up", cpu="8", labels={zone: "a"}))
    await api.create(resources.NODES, node("booting", cpu="8", ready=False, labels={zone: "b"}))
    spread = {
        "maxSkew": 1,
        "topologyKey": zone,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    for i in range(4):
        body = pod(f"spread-{i}", labels={"app": "spread"}, topologySpreadConstraints=[spread])
        await api.create(resources.PODS, body)
    report = await karpy_emulator_kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW)).sync()
    # Zone b is a domain with no pods (nodeTaintsPolicy Ignore): zone a may hold one pod, not all four.
    assert list(report.bound.values()) == ["up"]
    assert len(report.unschedulable) == 3


async def test_resources_of_bound_pods_count(api: rest.RestClient) -> None:
    await api.create(resources.NODES, node("n1", cpu="1"))
    await api.create(resources.PODS, pod("resident", cpu="800m", nodeName="n1"))
    await api.create(resources.PODS, pod("newcomer", cpu="500m"))
    report = await karpy_emulator_kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW)).sync()
    assert report.bound == {}
    assert "default/newcomer" in report.unschedulable


def test_unschedulable_patch_keeps_other_conditions() -> None:
    raw = {"status": {"conditions": [{"type": "Custom", "status": "True"}]}}
    patch = pod_conditions.unschedulable_patch(raw, "0/1 nodes are available: x", NOW)
    assert patch is not None
    types = [c["type"] for c in patch["status"]["conditions"]]
    assert types == ["Custom", "PodScheduled"]
    raw["status"]["conditions"] = patch["status"]["conditions"]
    assert pod_conditions.unschedulable_patch(raw, "0/1 nodes are available: x", NOW) is None
    assert pod_conditions.unschedulable_patch(raw, "0/2 nodes are available: y", NOW) is not None


def test_interchangeable_pods_get_the_reason_each_would_get_alone() -> None:
    """Reasons are worked out once per pod signature; each pod still gets exactly what explaining it alone gives."""
    tainted = node("tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    nodes = [node("small", cpu="1"), tainted]
    pending = [
        scheduling_pods.from_manifest(body)
        for body in (
            *(pod(f"big-{i}", cpu="4") for i in range(3)),  # no per-name label: interchangeable
            *(pod(f"huge-{i}", cpu="64") for i in range(2)),
            pod("tolerant", cpu="4", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        )
    ]
    placements, reasons = fit_errors.plan(pending, nodes, {})
    assert placements == {}
    existing = [
        scheduling_scheduler.ExistingNode(
            name=n["metadata"]["name"],
            labels=n["metadata"]["labels"],
            taints=node_facts.hard_taints(n),
            allocatable=node_facts.allocatable(n),
        )
        for n in nodes
    ]
    alone = {p.key: fit_errors.explain(p, existing, solver_reason="") for p in pending}
    assert reasons == alone
    assert len(set(reasons.values())) == 2  # the big and huge pods fail alike; the tolerant pod differs
    assert reasons["default/tolerant"] != reasons["default/big-0"]


async def _condition(api: rest.RestClient, name: str) -> tuple[str, str]:
    """The pod's resourceVersion and its PodScheduled message."""
    got = await _pod(api, name)
    scheduled = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    return got["metadata"]["resourceVersion"], scheduled["message"]


async def _failed_once(
    api: rest.RestClient,
) -> tuple[karpy_emulator_kube_scheduler.KubeScheduler, clock.ManualClock, str]:
    """A 3-cpu pod tried once on an empty cluster; the stand-in, its clock and the pod's resourceVersion."""
    await api.create(resources.PODS, pod("big", cpu="3"))
    now = clock.ManualClock(NOW)
    stand_in = karpy_emulator_kube_scheduler.KubeScheduler(api, clock=now)
    first = await stand_in.sync()
    assert first.unschedulable["default/big"] == "0/0 nodes are available: no nodes are ready and schedulable"
    version, _ = await _condition(api, "big")
    return stand_in, now, version


async def test_an_unchanged_cluster_costs_no_attempt_until_the_unschedulable_wait_ends(api: rest.RestClient) -> None:
    stand_in, now, version = await _failed_once(api)
    await now.run_for(299)
    assert (await stand_in.sync()).unschedulable == {}  # not tried: nothing changed
    assert (await _condition(api, "big"))[0] == version
    await now.run_for(1)  # podMaxInUnschedulablePodsDuration: tried again ...
    again = await stand_in.sync()
    assert again.unschedulable["default/big"].startswith("0/0 nodes")
    assert (await _condition(api, "big"))[0] == version  # ... and the same verdict writes nothing


async def test_a_node_the_pod_cannot_fit_leaves_it_waiting(api: rest.RestClient) -> None:
    stand_in, now, version = await _failed_once(api)
    await api.create(resources.NODES, node("small", cpu="1"))
    await now.run_for(30)
    assert (await stand_in.sync()).unschedulable == {}  # NodeResourcesFit's hint: the pod cannot fit there
    assert await _condition(api, "big") == (version, "0/0 nodes are available: no nodes are ready and schedulable")


async def test_a_node_that_may_take_the_pod_moves_it_and_a_changed_message_is_written(api: rest.RestClient) -> None:
    stand_in, now, version = await _failed_once(api)
    await api.create(resources.NODES, node("booting", cpu="4", ready=False))
    assert (await stand_in.sync()).unschedulable == {}  # moved by the node, but in its 1 s backoff
    await now.run_for(1)
    tried = await stand_in.sync()
    taint = "1 node(s) had untolerated taint {node.kubernetes.io/not-ready}"
    assert tried.unschedulable == {"default/big": f"0/1 nodes are available: {taint}."}
    written, message = await _condition(api, "big")
    assert written != version
    assert message == tried.unschedulable["default/big"]
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    await api.patch(resources.NODES, "booting", ready, subresource="status")  # the taint goes: moved again
    await now.run_for(1)
    assert (await stand_in.sync()).bound == {}  # the second backoff is 2 s
    await now.run_for(1)
    assert (await stand_in.sync()).bound == {"default/big": "booting"}


async def test_an_unchanged_message_is_not_written_when_the_pod_is_tried_again(api: rest.RestClient) -> None:
    stand_in, now, _ = await _failed_once(api)
    await api.create(resources.NODES, node("booting", cpu="4", ready=False))
    await now.run_for(1)
    await stand_in.sync()
    version, message = await _condition(api, "big")
    await api.create(resources.PODS, pod("tolerant", node="booting"))
    await stand_in.sync()
    await api.delete(resources.PODS, "tolerant", namespace="default")  # a pod leaving a node moves every pod ...
    await now.run_for(2)
    again = await stand_in.sync()
    assert again.unschedulable == {"default/big": message}  # ... to the same verdict
    assert await _condition(api, "big") == (version, message)


async def test_a_pod_only_taints_rejected_waits_for_a_taint_to_go(api: rest.RestClient) -> None:
    """TaintToleration's queueing hint (isSchedulableAfterNodeChange): a node that comes tainted, as a launching node
    does, does not move a pod no other filter rejected; the update that clears its taint does."""
    stand_in, now, _ = await _failed_once(api)
    await api.create(resources.NODES, node("booting", cpu="4", ready=False))
    await now.run_for(1)
    await stand_in.sync()  # rejected by the not-ready taint alone
    version, message = await _condition(api, "big")
    await api.create(resources.NODES, node("booting-2", cpu="4", ready=False))
    await now.run_for(30)
    assert (await stand_in.sync()).unschedulable == {}  # not tried: its message ("0/1 nodes") is not rewritten
    assert await _condition(api, "big") == (version, message)
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    await api.patch(resources.NODES, "booting-2", ready, subresource="status")
    assert (await stand_in.sync()).bound == {"default/big": "booting-2"}  # the backoff (2 s) ended meanwhile


def test_backoff_doubles_per_attempt_up_to_its_cap() -> None:
    queue = scheduling_queue.Queue()
    assert [queue.backoff(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
