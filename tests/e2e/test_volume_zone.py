"""Volume-zone workloads end to end: pods whose volumes pin a zone get a NodeClaim in that zone from the controller,
and the kube-scheduler stand-in binds them there, provisioning the volumes that wait for their first consumer.

* `db-0` mounts a claim already bound to an EBS volume in zone X (what a StatefulSet pod finds after a scale to zero
  or a node replacement): the controller must launch in X, where the PV's node affinity lets the pod run.
* `cache-0`, `cache-1` each mount an unbound claim of a WaitForFirstConsumer class whose allowedTopologies allow only
  zone Y: the controller must launch in Y; on binding, the stand-in (acting as the CSI provisioner and the PV
  controller) creates each claim's PV in Y and binds both ways.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane


def claim_zones(nodeclaim: dict[str, Any]) -> list[str]:
    """The zones a NodeClaim's requirements allow (what the controller asked the cloud provider for)."""
    return sorted(
        value
        for r in nodeclaim["spec"]["requirements"]
        if r["key"] == labels.LABEL_ZONE and r["operator"] == "In"
        for value in r["values"]
    )


async def volume_zone(emulated: cluster.EmulatedCluster, claim_name: str) -> str:
    pvc = await emulated.client.get(resources.PVCS, claim_name, namespace="default")
    assert pvc is not None
    assert pvc["status"]["phase"] == "Bound"
    pv = await emulated.client.get(resources.PVS, pvc["spec"]["volumeName"])
    assert pv is not None
    assert pv["status"]["phase"] == "Bound"
    assert (pv["spec"]["claimRef"]["name"], pv["spec"]["claimRef"]["uid"]) == (claim_name, pvc["metadata"]["uid"])
    (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert expression["key"] == labels.LABEL_ZONE
    (zone,) = expression["values"]
    return str(zone)


@pytest.mark.slow
async def test_volume_zones_steer_nodeclaims_and_binding(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    started = emulated.clock.now()
    zones = await support.zones(emulated)
    assert len(zones) == 3
    zone_x, zone_y = zones[0], zones[2]
    api = emulated.client
    await support.apply_defaults(emulated)
    await api.create(resources.STORAGECLASSES, builders.storage_class("gp3"))
    await api.create(resources.STORAGECLASSES, builders.storage_class("gp3-y", zones=[zone_y]))
    await api.create(resources.PVS, builders.pv("pv-db-0", zone=zone_x, claim="data-db-0"))
    await api.create(resources.PVCS, builders.pvc("data-db-0", storage_class_name="gp3", volume="pv-db-0"))
    await api.patch(
        resources.PVCS, "data-db-0", {"status": {"phase": "Bound"}}, namespace="default", subresource="status"
    )
    await api.patch(resources.PVS, "pv-db-0", {"status": {"phase": "Bound"}}, subresource="status")
    for name in ("cache-0", "cache-1"):
        await api.create(resources.PVCS, builders.pvc(f"data-{name}", storage_class_name="gp3-y"))
    for name in ("db-0", "cache-0", "cache-1"):
        await api.create(resources.PODS, builders.pod(name, labels={"app": "volume-zone"}, claims=[f"data-{name}"]))

    bound = await support.eventually(
        lambda: support.all_bound(emulated, "volume-zone", 3),
        clock=emulated.clock,
        within=45,
        what="the volume-zone pods bound",
    )

    by_name = {n["metadata"]["name"]: n for n in await support.nodes(emulated)}
    pods = {p["metadata"]["name"]: p for p in bound}
    assert support.node_zone(by_name, pods["db-0"]) == zone_x
    assert support.node_zone(by_name, pods["cache-0"]) == support.node_zone(by_name, pods["cache-1"]) == zone_y
    # The controller chose those zones (not the cheapest-zone lottery): each NodeClaim asked for exactly its zone.
    claim_of_node = {c["status"].get("nodeName"): c for c in await support.claims(emulated)}
    assert claim_zones(claim_of_node[pods["db-0"]["spec"]["nodeName"]]) == [zone_x]
    for name in ("cache-0", "cache-1"):
        assert claim_zones(claim_of_node[pods[name]["spec"]["nodeName"]]) == [zone_y]
    # The waiting claims got volumes in the zone their pods landed in; the pre-bound one kept its volume.
    assert await volume_zone(emulated, "data-cache-0") == zone_y
    assert await volume_zone(emulated, "data-cache-1") == zone_y
    db_claim = await api.get(resources.PVCS, "data-db-0", namespace="default")
    assert db_claim is not None
    assert db_claim["spec"]["volumeName"] == "pv-db-0"
    assert len((await api.list(resources.PVS))[0]) == 3  # one pre-existing, two provisioned
    assert emulated.clock.now() - started < 60  # seconds of the cluster clock: the controller's timers
