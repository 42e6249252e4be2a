"""NodeOverlays end to end (NodeOverlay gate) on the emulation: an overlay that makes the cheapest type dear moves
the launch to another type, and marks the claim `price-overlay-applied`; two overlays of one weight on one price
leave the later name in force and the other `Conflict`; a capacity overlay lets a pod asking for an extended
resource get a node (whose device plugin then registers the resource, as a real one would)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.e2e import support

from karpy import settings
from karpy.api import labels, nodeoverlay
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads

GATED = controlplane.Options(
    batch_idle=support.FAST.batch_idle,
    batch_max=support.FAST.batch_max,
    disruption_poll=support.FAST.disruption_poll,
    validation_delay=support.FAST.validation_delay,
    feature_gates=settings.FeatureGates(node_overlay=True),
)
TYPES = ("m5.large", "m6i.large", "m7i.large", "c5.large", "c6i.large")
FUSE = "smarter-devices/fuse"


@pytest.fixture
async def gated(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    async with controlplane.ControlPlane(emulated, GATED) as running:
        yield running


def overlay(name: str, *requirements: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": nodeoverlay.API_VERSION,
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": list(requirements), **spec},
    }


def of_types(*names: str) -> dict[str, Any]:
    return {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": list(names)}


async def validation(emulated: cluster.EmulatedCluster, name: str) -> tuple[str, str] | None:
    found = await emulated.client.get(resources.NODEOVERLAYS, name)
    condition = support.condition(found or {}, nodeoverlay.VALIDATION_SUCCEEDED)
    ready = support.condition(found or {}, nodeoverlay.READY)
    if condition is None or ready is None or ready["status"] != condition["status"]:
        return None
    return str(condition["status"]), str(condition["reason"])


async def verdict_is(emulated: cluster.EmulatedCluster, name: str, status: str) -> tuple[str, str] | None:
    """The overlay's validation once its status is `status`, else None (not yet)."""
    found = await validation(emulated, name)
    return found if found is not None and found[0] == status else None


async def test_an_overlay_making_the_cheapest_type_dear_changes_the_launched_type(
    emulated: cluster.EmulatedCluster, gated: controlplane.ControlPlane
) -> None:
    cheapest = min(TYPES, key=lambda t: (support.on_demand_price(emulated, t), t))
    await support.apply_defaults(emulated, support.pool(requirements=[of_types(*TYPES)]))
    api = emulated.client
    await api.create(resources.NODEOVERLAYS, overlay("dear", of_types(cheapest), weight=10, priceAdjustment="+500%"))
    # Two overlays of one weight on the same prices: the later name wins, the earlier is refused (upstream).
    await api.create(resources.NODEOVERLAYS, overlay("cheap-a", of_types("c6i.large"), weight=5, price="0.5"))
    await api.create(resources.NODEOVERLAYS, overlay("cheap-b", of_types("c6i.large"), weight=5, price="0.6"))
    # The controller may evaluate cheap-a before its cache holds cheap-b (cheap-a then validates alone); cheap-b's
    # arrival queues a new evaluation of every overlay, which must refuse cheap-a. So wait for each verdict, not for
    # the first one written.
    for name, verdict in (("dear", "True"), ("cheap-b", "True"), ("cheap-a", "False")):
        await support.eventually(
            functools.partial(verdict_is, emulated, name, verdict),
            clock=emulated.clock,
            within=30,
            what=f"{name} validated {verdict}",
        )
    assert (await validation(emulated, "cheap-a")) == ("False", nodeoverlay.REASON_CONFLICT)

    await api.create(workloads.DEPLOYMENTS, support.deployment("web", 1))
    (pod,) = await support.eventually(
        lambda: support.all_bound(emulated, "web", 1), clock=emulated.clock, within=60, what="the pod bound"
    )
    (claim,) = await support.claims(emulated)
    launched = support.instance_type_of(claim)
    overlaid = {t: support.on_demand_price(emulated, t) for t in TYPES} | {"c6i.large": 0.6}  # cheap-b's price
    overlaid[cheapest] *= 6  # "+500%"
    assert launched != cheapest, f"{cheapest} is dear under the overlay, yet it was launched"
    assert launched == min(TYPES, key=lambda t: (overlaid[t], t))
    assert claim["metadata"]["annotations"][nodeoverlay.ANNOTATION_PRICE_OVERLAY_APPLIED] == "true"
    assert pod["spec"]["nodeName"] == claim["status"]["nodeName"]


async def register_device(emulated: cluster.EmulatedCluster, amount: str) -> list[str]:
    """What a device plugin does on each node of the pool: advertise the extended resource."""
    named = []
    for node in await support.nodes(emulated):
        if FUSE in (node.get("status") or {}).get("allocatable", {}):
            continue
        status = {"capacity": {FUSE: amount}, "allocatable": {FUSE: amount}}
        await emulated.client.patch(resources.NODES, node["metadata"]["name"], {"status": status}, subresource="status")
        named.append(node["metadata"]["name"])
    return named


async def test_a_capacity_overlay_lets_a_pod_asking_for_an_extended_resource_schedule(
    emulated: cluster.EmulatedCluster, gated: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool(requirements=[of_types(*TYPES)]))
    await emulated.client.create(resources.NODEOVERLAYS, overlay("fuse", of_types(*TYPES), capacity={FUSE: "2"}))
    await support.eventually(
        lambda: validation(emulated, "fuse"), clock=emulated.clock, within=30, what="the overlay validated"
    )
    wants = support.deployment("fuse", 1)
    container = wants["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1", FUSE: "1"}, "limits": {FUSE: "1"}}
    await emulated.client.create(workloads.DEPLOYMENTS, wants)

    async def claimed() -> list[dict[str, Any]] | None:
        found = await support.claims(emulated)
        return found if found and all((c.get("status") or {}).get("nodeName") for c in found) else None

    (claim,) = await support.eventually(claimed, clock=emulated.clock, within=60, what="a node for the pod")
    assert claim["metadata"]["annotations"][nodeoverlay.ANNOTATION_CAPACITY_OVERLAY_APPLIED] == "true"
    assert claim["status"]["capacity"][FUSE] == "2"
    await support.eventually(
        lambda: register_device(emulated, "2"), clock=emulated.clock, within=30, what="the device registered"
    )
    (pod,) = await support.eventually(
        lambda: support.all_bound(emulated, "fuse", 1), clock=emulated.clock, within=60, what="the pod bound"
    )
    assert pod["spec"]["nodeName"] == claim["status"]["nodeName"]
