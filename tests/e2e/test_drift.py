"""Drift end to end: the EC2NodeClass's AMI changes under three running nodes; each NodeClaim becomes Drifted
(AMIDrift) and is replaced by a node on the new image, one at a time as the NodePool's budget (nodes: "1") allows,
while the pods move to the replacements."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy_emulator import cluster, controlplane, workloads

ONE_PER_HOST = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "drifty"}}}
            ]
        }
    }
}


@pytest.mark.slow
async def test_ami_change_drifts_every_node_within_the_budget(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    assert emulated.seeded is not None
    await support.apply_defaults(emulated, support.pool(consolidate_after="Never", budgets=[{"nodes": "1"}]))
    await emulated.client.create(
        workloads.DEPLOYMENTS, support.deployment("drifty", 3, cpu="500m", spec_extra=ONE_PER_HOST)
    )
    await support.eventually(
        lambda: support.all_bound(emulated, "drifty", 3), clock=emulated.clock, within=45, what="drifty bound"
    )
    old_claims = {c["metadata"]["name"] for c in await support.claims(emulated)}
    assert len(old_claims) == 3
    old_images = set((await support.instance_images(emulated)).values())
    assert old_images <= set(emulated.seeded.images.values())

    new_image = await support.register_image(emulated, "al2023-next")
    drifted: dict[str, str] = {}

    async def probe() -> list[str]:
        claims, node_list = await support.claims(emulated), await support.nodes(emulated)
        for claim in claims:
            found = support.condition(claim, "Drifted")
            if found is not None and found.get("status") == "True":
                drifted[claim["metadata"]["name"]] = str(found.get("reason"))
        return support.disrupting(claims, node_list)

    async def all_on_the_new_image() -> list[dict[str, Any]] | None:
        claims = await support.claims(emulated)
        images = await support.instance_images(emulated)
        bound = await support.all_bound(emulated, "drifty", 3)
        names = {c["metadata"]["name"] for c in claims}
        on_new = all(images.get(support.instance_id(c)) == new_image for c in claims)
        return bound if bound and len(claims) == 3 and not names & old_claims and on_new else None

    async with support.Sampler(probe, clock=emulated.clock) as sampler:
        await support.select_image(emulated, new_image)
        await support.eventually(
            all_on_the_new_image, clock=emulated.clock, within=60, what="every node replaced on the new image"
        )

    assert drifted.keys() >= old_claims
    assert {drifted[n] for n in old_claims} == {"AMIDrift"}
    most = max(len(s) for s in sampler.samples)
    assert most == 1, f"{most} NodeClaims disrupted at once with a budget of 1: {max(sampler.samples, key=len)}"
    assert set((await support.instance_images(emulated)).values()) == {new_image}
