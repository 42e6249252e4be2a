"""CapacityBuffers end to end (CapacityBuffer gate) on the emulation: a buffer for a Deployment keeps room for N more
of its pods; scaling the Deployment up by N binds the new pods into that room with no launch; the buffer's room is
then launched again (upstream: test/suites/regression/capacitybuffer_test.go, "Consumer Interaction": "should allow
consumer pods to use existing buffer capacity and then refill")."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.e2e import support

from karpy import settings
from karpy.api import capacitybuffer, labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads

GATED = controlplane.Options(
    batch_idle=support.FAST.batch_idle,
    batch_max=support.FAST.batch_max,
    disruption_poll=support.FAST.disruption_poll,
    validation_delay=support.FAST.validation_delay,
    feature_gates=settings.FeatureGates(capacity_buffer=True),
)
ROOM = 2
"""Chunks the buffer asks for: one web pod each, and one m5.large holds one web pod."""
ONE_TYPE = {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}


@pytest.fixture
async def gated(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    async with controlplane.ControlPlane(emulated, GATED) as running:
        yield running


def buffer(name: str, workload: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": capacitybuffer.API_VERSION,
        "kind": capacitybuffer.KIND,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": workload}, "replicas": replicas},
    }


async def fits(emulated: cluster.EmulatedCluster, name: str, *, claims: int) -> list[str] | None:
    """The launched nodes' names once the buffer says its room fits existing capacity and `claims` claims exist."""
    found = await emulated.client.get(resources.CAPACITYBUFFERS, name, namespace="default") or {}
    provisioning = support.condition(found, capacitybuffer.PROVISIONING)
    launched = [c for c in await support.claims(emulated) if (c.get("status") or {}).get("nodeName")]
    if provisioning is None or provisioning["status"] != "True" or len(launched) != claims:
        return None
    if len(await support.nodes(emulated)) != claims:
        return None
    return sorted(c["status"]["nodeName"] for c in launched)


async def test_a_buffer_keeps_room_that_a_scale_up_binds_into_without_a_launch(
    emulated: cluster.EmulatedCluster, gated: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool(requirements=[ONE_TYPE]))
    api = emulated.client
    await api.create(workloads.DEPLOYMENTS, support.deployment("web", 1))
    await api.create(resources.CAPACITYBUFFERS, buffer("web-room", "web", ROOM))
    ready = await support.eventually(
        functools.partial(fits, emulated, "web-room", claims=1 + ROOM),
        clock=emulated.clock,
        within=120,
        what="the web pod's node and the buffer's room launched",
    )
    stored = await api.get(resources.CAPACITYBUFFERS, "web-room", namespace="default") or {}
    assert stored["status"]["replicas"] == ROOM
    assert support.condition(stored, capacitybuffer.READY_FOR_PROVISIONING)["status"] == "True"  # type: ignore[index]
    # kube-scheduler tries the web pod again once a node it may fit changes, after its backoff (up to 10 s)
    await support.eventually(
        lambda: support.all_bound(emulated, "web", 1), clock=emulated.clock, within=30, what="the web pod bound"
    )

    await support.scale(emulated, "web", 1 + ROOM)
    bound = await support.eventually(
        lambda: support.all_bound(emulated, "web", 1 + ROOM), clock=emulated.clock, within=30, what="web scaled up"
    )
    # into the room: every new pod is on a node that was there before the scale-up
    assert {p["spec"]["nodeName"] for p in bound} <= set(ready)
    assert len({p["spec"]["nodeName"] for p in bound}) == 1 + ROOM

    restored = await support.eventually(
        functools.partial(fits, emulated, "web-room", claims=1 + 2 * ROOM),
        clock=emulated.clock,
        within=120,
        what="the buffer's room launched again",
    )
    assert set(ready) < set(restored)
    # the real pods stayed where they were bound; the new nodes hold only the buffer's (virtual) room
    assert {p["spec"]["nodeName"] for p in await support.pods_of(emulated, "web")} == set(ready)
