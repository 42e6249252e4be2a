"""Static NodePools end to end (StaticCapacity gate): a pool with `replicas: 2` gets two nodes with no pod asking;
`kubectl scale nodepool` to 3 adds one and back to 1 removes two; an AMI change replaces the remaining node one for
one (StaticDrift) and the pool stays at its count the whole time."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.e2e import support
from tests.emulator import kubectl as emulator_kubectl

from karpy import settings
from karpy.api import labels
from karpy_emulator import cluster, controlplane

STATIC = "static"
GATED = controlplane.Options(
    batch_idle=support.FAST.batch_idle,
    batch_max=support.FAST.batch_max,
    disruption_poll=support.FAST.disruption_poll,
    validation_delay=support.FAST.validation_delay,
    feature_gates=settings.FeatureGates(static_capacity=True),
)


def static_pool(replicas: int) -> dict[str, Any]:
    body = support.pool(STATIC, consolidate_after="Never", budgets=[{"nodes": "1"}])
    body["spec"]["replicas"] = replicas
    body["spec"]["limits"] = {"nodes": "5"}  # static pools may only limit nodes (CEL)
    return body


@pytest.fixture
async def gated(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    async with controlplane.ControlPlane(emulated, GATED) as running:
        yield running


async def static_nodes(emulated: cluster.EmulatedCluster, count: int) -> list[dict[str, Any]] | None:
    """The static pool's claims when exactly `count` exist, none deleting, each with a Ready Node."""
    found = [c for c in await support.claims(emulated) if c["metadata"]["labels"].get(labels.LABEL_NODEPOOL) == STATIC]
    ready = {n["metadata"]["name"] for n in await support.nodes(emulated) if support.is_true(n, "Ready")}
    settled = all(
        not c["metadata"].get("deletionTimestamp") and (c.get("status") or {}).get("nodeName") in ready for c in found
    )
    return found if len(found) == count and settled else None


@pytest.mark.slow
async def test_kubectl_scale_moves_a_static_pool_and_drift_replaces_its_node(
    emulated: cluster.EmulatedCluster, gated: controlplane.ControlPlane, tmp_path: pathlib.Path
) -> None:
    kubectl = emulator_kubectl.for_cluster(emulated, tmp_path)
    await support.apply_defaults(emulated, static_pool(2))
    await support.eventually(
        lambda: static_nodes(emulated, 2), clock=emulated.clock, within=45, what="two static nodes"
    )
    assert await support.running_instances(emulated)

    await kubectl.arun("scale", "nodepool", STATIC, "--replicas=3")
    three = await support.eventually(
        lambda: static_nodes(emulated, 3), clock=emulated.clock, within=45, what="three static nodes"
    )
    replicas = await kubectl.arun("get", "nodepool", STATIC, "-o", "jsonpath={.spec.replicas}")
    assert replicas.out == "3"

    await kubectl.arun("scale", "nodepool", STATIC, "--replicas=1")
    (left,) = await support.eventually(
        lambda: static_nodes(emulated, 1), clock=emulated.clock, within=45, what="one static node"
    )
    assert left["metadata"]["name"] in {c["metadata"]["name"] for c in three}

    async def no_extra_instance() -> bool:
        return len(await support.running_instances(emulated)) == 1

    await support.eventually(
        no_extra_instance, clock=emulated.clock, within=30, what="the removed nodes' instances terminated"
    )

    new_image = await support.register_image(emulated, "al2023-static-next")
    seen: list[int] = []

    async def replaced() -> list[dict[str, Any]] | None:
        found = await static_nodes(emulated, 1)
        images = await support.instance_images(emulated)
        if found and found[0]["metadata"]["name"] != left["metadata"]["name"]:
            return found if images.get(support.instance_id(found[0])) == new_image else None
        return None

    async def probe() -> int:
        found = [c for c in await support.claims(emulated) if not c["metadata"].get("deletionTimestamp")]
        seen.append(len(found))
        return len(found)

    async with support.Sampler(probe, clock=emulated.clock):
        await support.select_image(emulated, new_image)
        await support.eventually(
            replaced, clock=emulated.clock, within=60, what="the drifted static node replaced on the new image"
        )
    # Replace first, then delete: never below the replica count, never more than one replacement at a time.
    assert min(seen) >= 1
    assert max(seen) <= 2
