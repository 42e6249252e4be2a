"""The disruption-controller stand-in: PDB status from the pods (table tests of the pure part), and its passes against
the emulated API server (writes only on change, follows evictions and replacements)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import client, credentials, resources, rest
from karpy_emulator import pdbs, reads, workloads
from karpy_emulator.apiserver import runner

NOW = 1_700_000_000.0
NOW_STAMP = "2023-11-14T22:13:20Z"


def _owned(name: str, kind: str, owner: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    pod = builders.pod(name, labels={"app": "web"})
    if ready:
        pod = builders.ready(pod)
    pod["metadata"]["ownerReferences"] = [{"kind": kind, "name": owner, "controller": True}]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = NOW_STAMP
    return pod


def _owners(replicas: int) -> pdbs.OwnerIndex:
    """web-rs (a ReplicaSet) owned by the Deployment web, which wants `replicas`."""
    rs = {
        "metadata": {
            "name": "web-rs",
            "uid": "rs-uid",
            "namespace": "default",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
        },
        "spec": {"replicas": replicas},
    }
    deployment = {
        "metadata": {"name": "web", "uid": "deploy-uid", "namespace": "default"},
        "spec": {"replicas": replicas},
    }
    return {("ReplicaSet", "default", "web-rs"): rs, ("Deployment", "default", "web"): deployment}


def _web(count: int, **kwargs: Any) -> list[dict[str, Any]]:
    return [_owned(f"web-{i}", "ReplicaSet", "web-rs", **kwargs) for i in range(count)]


def test_scale_follows_controllers_to_the_deployment() -> None:
    scale = pdbs.scale_from(_owners(4))
    assert scale(_owned("a", "ReplicaSet", "web-rs")) == ("deploy-uid", 4)
    assert scale(builders.pod("bare")) is None
    assert scale(_owned("b", "Job", "batch")) is None  # a Job has no scale: a bare pod for budgets
    # the Deployment is gone: the ReplicaSet is the top-most controller left
    rs_only = {k: v for k, v in _owners(4).items() if k[0] == "ReplicaSet"}
    assert pdbs.scale_from(rs_only)(_owned("c", "ReplicaSet", "web-rs")) == ("rs-uid", 4)


@pytest.mark.parametrize(
    ("spec", "pods", "replicas", "expected"),
    [
        # (expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed)
        ({"maxUnavailable": 1}, _web(4), 4, (4, 4, 3, 1)),
        ({"maxUnavailable": 1}, _web(3), 4, (4, 3, 3, 0)),  # one replica missing: nothing more may go
        ({"maxUnavailable": 1}, [*_web(3), *_web(1, ready=False)], 4, (4, 3, 3, 0)),  # an unready one counts out
        ({"maxUnavailable": 1}, [*_web(3), *_web(1, deleting=True)], 4, (4, 3, 3, 0)),  # so does a deleting one
        ({"minAvailable": 3}, _web(4), 4, (4, 4, 3, 1)),  # an integer minAvailable counts the selected pods
        ({"minAvailable": "50%"}, _web(4), 6, (6, 4, 3, 1)),  # a percentage counts the desired replicas
        ({"maxUnavailable": "50%"}, _web(4), 4, (4, 4, 2, 2)),
        ({"maxUnavailable": 1}, [builders.ready(builders.pod(f"b{i}", labels={"app": "web"})) for i in range(3)], 3,
         (3, 3, 3, 0)),  # bare pods under maxUnavailable: fail safe
        ({"minAvailable": 1}, [], 0, (0, 0, 1, 0)),
    ],
)  # fmt: skip
def test_status_counts(
    spec: dict[str, Any], pods: list[dict[str, Any]], replicas: int, expected: tuple[int, int, int, int]
) -> None:
    pdb = builders.pdb("web", {"app": "web"}, **spec)
    pdb["metadata"]["generation"] = 3
    status = pdbs.status_for(pdb, pods, pdbs.scale_from(_owners(replicas)), now=NOW)
    counts = (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"])
    assert counts == expected
    assert status["observedGeneration"] == 3
    (condition,) = status["conditions"]
    allowed = expected[3] > 0
    assert condition["type"] == "DisruptionAllowed"
    assert (condition["status"], condition["reason"]) == (
        ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
    )
    assert condition["observedGeneration"] == 3
    assert condition["lastTransitionTime"] == NOW_STAMP


def test_condition_keeps_its_transition_time_until_its_status_changes() -> None:
    pdb = builders.pdb("web", {"app": "web"}, maxUnavailable=1)
    scale = pdbs.scale_from(_owners(4))
    first = pdbs.status_for(pdb, _web(4), scale, now=NOW)
    pdb["status"] = first
    later = pdbs.status_for(pdb, _web(4), scale, now=NOW + 60)
    assert not pdbs.changed(pdb, later)
    assert later["conditions"][0]["lastTransitionTime"] == NOW_STAMP
    exhausted = pdbs.status_for(pdb, _web(3), scale, now=NOW + 60)
    assert pdbs.changed(pdb, exhausted)
    assert exhausted["conditions"][0]["lastTransitionTime"] == "2023-11-14T22:14:20Z"


def test_an_invalid_budget_fails_safe() -> None:
    pdb = builders.pdb("web", {"app": "web"}, maxUnavailable="lots")
    pdb["metadata"]["generation"] = 2
    pdb["status"] = {"expectedPods": 4, "currentHealthy": 4, "desiredHealthy": 3, "disruptionsAllowed": 1}
    status = pdbs.status_for(pdb, _web(4), pdbs.scale_from(_owners(4)), now=NOW)
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (4, 4, 0)
    (condition,) = status["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "SyncFailed")
    assert "lots" in condition["message"]


def test_a_new_generation_is_a_change() -> None:
    pdb = builders.pdb("web", {"app": "web"}, maxUnavailable=1)
    scale = pdbs.scale_from(_owners(4))
    pdb["status"] = pdbs.status_for(pdb, _web(4), scale, now=NOW)
    pdb["metadata"]["generation"] = 2
    assert pdbs.changed(pdb, pdbs.status_for(pdb, _web(4), scale, now=NOW))


# --- against the emulated API server ----------------------------------------------------------------------------


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        yield client


async def _make_ready(api: rest.RestClient) -> list[dict[str, Any]]:
    pods, _ = await api.list(resources.PODS, namespace="default", label_selector="app=web")
    for pod in pods:
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        await api.patch(
            resources.PODS, pod["metadata"]["name"], {"status": ready}, namespace="default", subresource="status"
        )
    return pods


async def _status(api: rest.RestClient, name: str = "web") -> Mapping[str, Any]:
    pdb = await api.get(resources.PDBS, name, namespace="default")
    assert pdb is not None
    return pdb.get("status") or {}


async def test_status_follows_the_pods_and_is_written_only_on_change(
    api: rest.RestClient, stand_in_reader: reads.Reader | None
) -> None:
    stand_in = pdbs.DisruptionController(api, clock=clock.ManualClock(NOW), reader=stand_in_reader)
    replicas = workloads.WorkloadController(api, clock=clock.ManualClock(NOW), reader=stand_in_reader)
    assert (await stand_in.sync()).written == []  # no PDB: nothing to do
    await api.create(workloads.DEPLOYMENTS, builders.deployment("web", 3, cpu=None))
    for pdb in (
        builders.pdb("web", {"app": "web"}, maxUnavailable=1),
        builders.pdb("other", {"app": "x"}, minAvailable=1),
    ):
        await api.create(resources.PDBS, pdb)
    await replicas.sync()

    assert sorted((await stand_in.sync()).written) == ["default/other", "default/web"]
    status = await _status(api)
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (3, 0, 0)
    assert status["conditions"][0]["reason"] == "InsufficientPods"
    assert status["observedGeneration"] == 1

    pods = await _make_ready(api)
    assert (await stand_in.sync()).written == ["default/web"]  # "other" selects nothing either way
    status = await _status(api)
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (3, 2, 1)
    assert status["conditions"][0]["status"] == "True"
    assert (await stand_in.sync()).written == []  # nothing changed: no write

    # an eviction uses the budget up until the ReplicaSet's replacement is Ready
    assert await api.evict("default", pods[0]["metadata"]["name"]) is client.EvictionOutcome.EVICTED
    await stand_in.sync()
    assert (await _status(api))["disruptionsAllowed"] == 0
    await replicas.sync()
    await _make_ready(api)
    await stand_in.sync()
    assert (await _status(api))["disruptionsAllowed"] == 1
    # a new spec is a new generation
    await api.patch(resources.PDBS, "web", {"spec": {"maxUnavailable": 2}}, namespace="default")
    assert (await stand_in.sync()).written == ["default/web"]
    status = await _status(api)
    assert (status["observedGeneration"], status["disruptionsAllowed"]) == (2, 2)
