"""The Deployment/ReplicaSet stand-in against the emulated API server: scale 0 → 8 → 40 → 5 → 0, replacement, GC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy_emulator import reads, workloads
from karpy_emulator.apiserver import runner


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        yield client


@pytest.fixture
def controller(api: rest.RestClient, stand_in_reader: reads.Reader | None) -> workloads.WorkloadController:
    return workloads.WorkloadController(api, clock=clock.ManualClock(), reader=stand_in_reader)


async def _pods(api: rest.RestClient) -> list[dict[str, Any]]:
    items, _ = await api.list(resources.PODS, namespace="default", label_selector="app=inflate")
    return items


async def _scale(api: rest.RestClient, replicas: int) -> None:
    await api.patch(workloads.DEPLOYMENTS, "inflate", {"spec": {"replicas": replicas}}, namespace="default")


async def test_scaling_inflate_up_and_down(api: rest.RestClient, controller: workloads.WorkloadController) -> None:
    await api.create(workloads.DEPLOYMENTS, builders.deployment("inflate", 0))
    await controller.sync()
    replicasets, _ = await api.list(workloads.REPLICASETS, namespace="default")
    assert len(replicasets) == 1
    rs = replicasets[0]
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert await _pods(api) == []

    for replicas in (8, 40, 5, 0):
        await _scale(api, replicas)
        report = await controller.sync()
        pods = await _pods(api)
        assert len(pods) == replicas
        assert (await controller.sync()).created == []  # converged: a second pass changes nothing
        for pod in pods:
            (ref,) = pod["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
                "ReplicaSet",
                rs["metadata"]["name"],
                rs["metadata"]["uid"],
                True,
            )
            assert (
                pod["metadata"]["labels"][workloads.POD_TEMPLATE_HASH]
                == rs["spec"]["selector"]["matchLabels"][workloads.POD_TEMPLATE_HASH]
            )
        if replicas == 40:
            assert len(report.created) == 32
        if replicas == 5:
            assert len(report.deleted) == 35
    stored = await api.get(workloads.DEPLOYMENTS, "inflate", namespace="default")
    assert stored is not None
    assert stored["status"]["replicas"] == 0


async def test_deleted_pods_are_replaced_and_unscheduled_pods_go_first(
    api: rest.RestClient, controller: workloads.WorkloadController
) -> None:
    await api.create(workloads.DEPLOYMENTS, builders.deployment("inflate", 4))
    await controller.sync()
    pods = await _pods(api)
    bound = sorted(p["metadata"]["name"] for p in pods)[:2]
    for name in bound:
        await api.bind("default", name, "node-a")
    victim = next(p["metadata"]["name"] for p in pods if p["metadata"]["name"] not in bound)
    assert await api.delete(resources.PODS, victim, namespace="default")
    report = await controller.sync()
    assert len(report.created) == 1
    assert len(await _pods(api)) == 4

    await _scale(api, 2)
    report = await controller.sync()
    survivors = sorted(p["metadata"]["name"] for p in await _pods(api))
    assert survivors == bound  # the two unscheduled pods were removed, the scheduled ones kept


async def test_a_pod_deleted_once_converged_is_replaced(
    api: rest.RestClient, controller: workloads.WorkloadController
) -> None:
    await api.create(workloads.DEPLOYMENTS, builders.deployment("inflate", 3))
    await controller.sync()
    await controller.sync()  # sees the statuses the first pass wrote
    assert await controller.sync() == workloads.WorkloadReport()  # converged: nothing queued, nothing written
    victim = (await _pods(api))[0]["metadata"]["name"]
    assert await api.delete(resources.PODS, victim, namespace="default")
    report = await controller.sync()  # the pod's deletion alone queues its ReplicaSet
    assert len(report.created) == 1
    assert len(await _pods(api)) == 3


async def test_template_change_rolls_and_deletion_collects(
    api: rest.RestClient, controller: workloads.WorkloadController
) -> None:
    await api.create(workloads.DEPLOYMENTS, builders.deployment("inflate", 3))
    await controller.sync()
    await api.patch(
        workloads.DEPLOYMENTS,
        "inflate",
        {"spec": {"template": builders.deployment("inflate", 3, image="pause:v2")["spec"]["template"]}},
        namespace="default",
    )
    await controller.sync()
    replicasets, _ = await api.list(workloads.REPLICASETS, namespace="default")
    assert sorted(rs["spec"]["replicas"] for rs in replicasets) == [0, 3]
    images = {p["spec"]["containers"][0]["image"] for p in await _pods(api)}
    assert images == {"pause:v2"}

    assert await api.delete(workloads.DEPLOYMENTS, "inflate", namespace="default")
    first = await controller.sync()  # the ReplicaSets go (their pods are orphaned by then)
    assert len([c for c in first.collected if c.startswith("ReplicaSet")]) == 2
    await controller.sync()
    assert await _pods(api) == []
    assert (await api.list(workloads.REPLICASETS, namespace="default"))[0] == []


def test_deletion_order_prefers_unscheduled_then_not_running_then_newest() -> None:
    def pod(name: str, *, node: str = "", phase: str = "Pending", created: str = "2024-01-01T00:00:00Z") -> Any:
        return {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase},
        }

    ordered = workloads.deletion_order(
        [
            pod("old-running", node="n", phase="Running", created="2024-01-01T00:00:00Z"),
            pod("new-running", node="n", phase="Running", created="2024-01-02T00:00:00Z"),
            pod("bound-pending", node="n"),
            pod("unscheduled"),
        ]
    )
    assert [p["metadata"]["name"] for p in ordered] == ["unscheduled", "bound-pending", "new-running", "old-running"]


async def test_a_pass_creates_at_most_a_burst_in_slow_start_batches(
    api: rest.RestClient, stand_in_reader: reads.Reader | None
) -> None:
    controller = workloads.WorkloadController(api, clock=clock.ManualClock(), reader=stand_in_reader, burst_replicas=5)
    await api.create(workloads.DEPLOYMENTS, builders.deployment("inflate", 12))
    created = [len((await controller.sync()).created) for _ in range(4)]
    assert created == [5, 5, 2, 0]  # kube-controller-manager's BurstReplicas per sync, then converged
    assert len(await _pods(api)) == 12
    await _scale(api, 1)
    deleted = [len((await controller.sync()).deleted) for _ in range(3)]
    assert deleted == [5, 5, 1]
    assert len(await _pods(api)) == 1
