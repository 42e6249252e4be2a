"""The kube-scheduler stand-in with volumes, against the emulated API server: PV node affinity and WaitForFirstConsumer
classes restrict nodes as kube-scheduler's VolumeBinding does, and binding a pod provisions its volumes in the node's
zone, bound both ways."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy_emulator import kube_scheduler
from karpy_emulator import volumes as karpy_emulator_volumes
from karpy_emulator.apiserver import runner

NOW = 1_700_000_000.0
ZONES = ("zone-a", "zone-b")


def zone_node(zone: str) -> dict[str, Any]:
    return builders.node(f"node-{zone}", labels={builders.ZONE_KEY: zone}, cpu="8", ready=True, hostname=True)


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        for zone in ZONES:
            await client.create(resources.NODES, zone_node(zone))
        yield client


async def _create(api: rest.RestClient, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        kind = body["kind"]
        res = {"StorageClass": resources.STORAGECLASSES, "PersistentVolume": resources.PVS}.get(kind)
        res = res or {"PersistentVolumeClaim": resources.PVCS, "Pod": resources.PODS}[kind]
        await api.create(res, body)


async def _get(api: rest.RestClient, res: resources.Resource, name: str, namespace: str = "") -> dict[str, Any]:
    got = await api.get(res, name, namespace=namespace)
    assert got is not None, name
    return got


async def _sync(api: rest.RestClient) -> kube_scheduler.ScheduleReport:
    return await kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW)).sync()


async def _pv_zone_of_claim(api: rest.RestClient, claim: str) -> str:
    pvc = await _get(api, resources.PVCS, claim, "default")
    pv = await _get(api, resources.PVS, pvc["spec"]["volumeName"])
    (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (builders.ZONE_KEY, "In")
    (zone,) = expression["values"]
    return str(zone)


@pytest.mark.parametrize("key", [builders.ZONE_KEY, builders.EBS_ZONE_KEY])
async def test_a_bound_volume_pins_its_zone(api: rest.RestClient, key: str) -> None:
    await _create(
        api,
        builders.storage_class(),
        builders.pv("pv-b", zone="zone-b", key=key, claim="data-b"),
        builders.pvc("data-b", volume="pv-b"),
        builders.pv("pv-c", zone="zone-c", key=key, claim="data-c"),
        builders.pvc("data-c", volume="pv-c"),
        builders.pod("in-b", claims=["data-b"]),
        builders.pod("in-c", claims=["data-c"]),
    )
    report = await _sync(api)
    assert report.bound == {"default/in-b": "node-zone-b"}
    assert report.unschedulable == {
        "default/in-c": f"0/2 nodes are available: 2 {karpy_emulator_volumes.NODE_AFFINITY_CONFLICT}."
    }
    assert (await _get(api, resources.PVS, "pv-b"))["spec"]["claimRef"]["name"] == "data-b"  # untouched
    assert [pv["metadata"]["name"] for pv in (await api.list(resources.PVS))[0]] == ["pv-b", "pv-c"]  # none made


async def test_wait_for_first_consumer_provisions_in_an_allowed_zone_and_binds_both_ways(api: rest.RestClient) -> None:
    await _create(
        api, builders.storage_class("only-b", zones=["zone-b"]), builders.pvc("data", storage_class_name="only-b")
    )
    await _create(api, builders.pod("app", claims=["data"]))

    report = await _sync(api)

    assert report.bound == {"default/app": "node-zone-b"}
    pvc = await _get(api, resources.PVCS, "data", "default")
    pv = await _get(api, resources.PVS, pvc["spec"]["volumeName"])
    assert pv["metadata"]["name"] == f"pvc-{pvc['metadata']['uid']}"
    assert await _pv_zone_of_claim(api, "data") == "zone-b"
    annotations = pvc["metadata"]["annotations"]
    assert annotations[karpy_emulator_volumes.ANN_SELECTED_NODE] == "node-zone-b"
    assert annotations[karpy_emulator_volumes.ANN_BIND_COMPLETED] == "yes"
    assert pvc["status"]["phase"] == pv["status"]["phase"] == "Bound"
    claim_ref = pv["spec"]["claimRef"]
    assert (claim_ref["namespace"], claim_ref["name"], claim_ref["uid"]) == ("default", "data", pvc["metadata"]["uid"])
    assert pv["spec"]["storageClassName"] == "only-b"
    assert (await _get(api, resources.PODS, "app", "default"))["spec"]["nodeName"] == "node-zone-b"


async def test_wait_for_first_consumer_without_topologies_follows_the_chosen_node(api: rest.RestClient) -> None:
    await _create(
        api,
        builders.storage_class("gp3", default=True),
        builders.pvc("named"),
        builders.pvc("defaulted", storage_class_name=None),
    )
    await _create(api, builders.pod("app", claims=["named", "defaulted"]))
    report = await _sync(api)
    node_name = report.bound["default/app"]
    zone = node_name.removeprefix("node-")
    assert await _pv_zone_of_claim(api, "named") == zone
    assert await _pv_zone_of_claim(api, "defaulted") == zone  # the default class provisioned it


async def test_no_allowed_zone_has_a_node(api: rest.RestClient) -> None:
    await _create(
        api, builders.storage_class("only-c", zones=["zone-c"]), builders.pvc("data", storage_class_name="only-c")
    )
    await _create(api, builders.pod("app", claims=["data"]))
    report = await _sync(api)
    assert report.unschedulable == {
        "default/app": f"0/2 nodes are available: 2 {karpy_emulator_volumes.BIND_CONFLICT}."
    }
    assert (await api.list(resources.PVS))[0] == []  # nothing provisioned for a pod that did not bind


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ([], "persistentvolumeclaim default/data not found"),
        (
            [builders.storage_class("now", mode="Immediate"), builders.pvc("data", storage_class_name="now")],
            "persistentvolumeclaim default/data is unbound and storageclass now binds Immediate",
        ),
        ([builders.pvc("data", volume="gone")], "persistentvolume gone bound to default/data not found"),
    ],
)
async def test_volumes_that_cannot_be_resolved_leave_the_pod_unschedulable(
    api: rest.RestClient, objects: list[dict[str, Any]], message: str
) -> None:
    await _create(api, *objects, builders.pod("app", claims=["data"]))
    report = await _sync(api)
    assert report.bound == {}
    assert report.unschedulable["default/app"].startswith(f"0/2 nodes are available: {message}")
    stored = await _get(api, resources.PODS, "app", "default")
    condition = next(c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")


async def test_pods_sharing_an_unbound_claim_end_up_in_its_zone(api: rest.RestClient) -> None:
    await _create(api, builders.storage_class(), builders.pvc("shared"))
    await _create(api, builders.pod("first", claims=["shared"]), builders.pod("second", claims=["shared"]))
    first = await _sync(api)
    assert len(first.bound) == 1  # the second waits: the claim's zone was only just chosen
    second = await _sync(api)
    assert len(second.bound) == 1
    zone = await _pv_zone_of_claim(api, "shared")
    assert {*first.bound.values(), *second.bound.values()} == {f"node-{zone}"}
    assert len((await api.list(resources.PVS))[0]) == 1


async def test_an_unbound_claim_with_no_class_to_provision_from_waits(api: rest.RestClient) -> None:
    await _create(
        api, builders.pvc("static", storage_class_name=None), builders.pod("app", claims=["static"])
    )  # no default class
    report = await _sync(api)
    assert report.bound == {}
    # an unbound claim without a class is bound immediately or never: kube-scheduler refuses it in PreFilter
    why = "persistentvolumeclaim default/static is unbound and has no storage class to provision it"
    assert report.unschedulable == {"default/app": f"0/2 nodes are available: {why}."}
    assert (await api.list(resources.PVS))[0] == []


async def test_a_volume_left_by_an_interrupted_pass_is_bound_and_its_zone_respected(api: rest.RestClient) -> None:
    await _create(api, builders.storage_class(), builders.pvc("data"))
    uid = (await _get(api, resources.PVCS, "data", "default"))["metadata"]["uid"]
    await _create(api, builders.pv(f"pvc-{uid}", zone="zone-c"))  # provisioned for an earlier choice, never bound
    await _create(api, builders.pod("app", claims=["data"]))

    first = await _sync(api)
    assert first.bound == {}  # zone-c has no node: binding the pod now would strand it
    assert await _pv_zone_of_claim(api, "data") == "zone-c"  # but the claim took the volume, as the PV controller does
    second = await _sync(api)
    assert second.unschedulable == {
        "default/app": f"0/2 nodes are available: 2 {karpy_emulator_volumes.NODE_AFFINITY_CONFLICT}."
    }
    assert len((await api.list(resources.PVS))[0]) == 1
