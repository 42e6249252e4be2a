"""Consolidation end to end, both outcomes of upstream's single-node consolidation:

* delete: two 2-vCPU nodes each left with one small pod after a scale-down; one node is removed without any new
  NodeClaim, and its pod is evicted and repacked onto the other;
* replace: a big node left holding only a small pod after the big pod goes is replaced by one cheaper NodeClaim,
  and the small pod moves to it.
"""

from __future__ import annotations

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy_emulator import cluster, controlplane, workloads

TWO_VCPU = {"key": labels.LABEL_INSTANCE_CPU, "operator": "In", "values": ["2"]}


@pytest.mark.slow
async def test_an_underutilized_node_is_deleted_and_its_pod_repacked(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool(requirements=[TWO_VCPU]))
    # Two pods of 700m fill a 2-vCPU node (1930m allocatable): "left" gets one node, "right" (later) another.
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("left", 2, cpu="700m"))
    await support.eventually(
        lambda: support.all_bound(emulated, "left", 2), clock=emulated.clock, within=40, what="left bound"
    )
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("right", 2, cpu="700m"))
    await support.eventually(
        lambda: support.all_bound(emulated, "right", 2), clock=emulated.clock, within=40, what="right bound"
    )
    originals = {c["metadata"]["name"]: support.instance_id(c) for c in await support.claims(emulated)}
    assert len(originals) == 2
    seen: set[str] = set()

    async def probe() -> None:
        seen.update(c["metadata"]["name"] for c in await support.claims(emulated))

    async def repacked() -> str | None:
        claims = await support.claims(emulated)
        left = await support.all_bound(emulated, "left", 1)
        right = await support.all_bound(emulated, "right", 1)
        if len(claims) != 1 or not left or not right:
            return None
        nodes = {p["spec"]["nodeName"] for p in (*left, *right)}
        return str(claims[0]["metadata"]["name"]) if nodes == {claims[0]["status"]["nodeName"]} else None

    async with support.Sampler(probe, clock=emulated.clock):
        # Each node keeps one 700m pod: either node's pod fits beside the other's.
        await support.scale(emulated, "left", 1)
        await support.scale(emulated, "right", 1)
        survivor = await support.eventually(
            repacked, clock=emulated.clock, within=45, what="one node left with both pods"
        )

    assert survivor in originals
    assert seen == set(originals), f"consolidation launched {seen - set(originals)}: a delete needs no new node"
    (gone,) = set(originals) - {survivor}
    assert originals[gone] not in await support.running_instances(emulated)


@pytest.mark.slow
async def test_a_big_node_left_with_a_small_pod_is_replaced_by_a_cheaper_one(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated)
    # One batch: the big and the small pod share one node big enough for both.
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("big", 1, cpu="6"))
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("small", 1, cpu="500m"))
    await support.eventually(
        lambda: support.all_bound(emulated, "big", 1), clock=emulated.clock, within=40, what="big bound"
    )
    await support.eventually(
        lambda: support.all_bound(emulated, "small", 1), clock=emulated.clock, within=20, what="small bound"
    )
    (original,) = await support.claims(emulated)
    original_type = support.instance_type_of(original)
    original_price = support.on_demand_price(emulated, original_type)

    await support.scale(emulated, "big", 0)

    async def replaced() -> dict[str, object] | None:
        claims = await support.claims(emulated)
        small = await support.all_bound(emulated, "small", 1)
        if len(claims) != 1 or claims[0]["metadata"]["name"] == original["metadata"]["name"] or not small:
            return None
        return claims[0] if small[0]["spec"]["nodeName"] == claims[0]["status"].get("nodeName") else None

    replacement = await support.eventually(
        replaced, clock=emulated.clock, within=50, what="the big node replaced by a cheaper one"
    )
    new_type = support.instance_type_of(replacement)
    new_price = support.on_demand_price(emulated, new_type)
    assert new_price < original_price, (
        f"{new_type} (${new_price}/h) is not cheaper than {original_type} (${original_price}/h)"
    )
    assert support.instance_id(original) not in await support.running_instances(emulated)
