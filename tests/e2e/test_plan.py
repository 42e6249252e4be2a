"""`karpy plan` agrees with the controller: on the emulated cluster (autojump virtual clock, plan over the API
server's kubeconfig as a user runs it), a NodePool template change is planned, then applied; the NodeClaims the
controller marks Drifted and replaces are exactly those plan said drift, and at no moment are more of them being
disrupted than the largest wave plan said the budget allows."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
import yaml
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy.plan import command
from karpy_emulator import cluster, controlplane, workloads

APART = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "planned"}}}
            ]
        }
    }
}
NODES = 4
BUDGET = "2"


@pytest.mark.slow
async def test_the_controller_replaces_what_plan_said_in_waves_no_larger(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane, tmp_path: pathlib.Path
) -> None:
    clock = emulated.clock
    before = support.pool(consolidate_after="Never", budgets=[{"nodes": BUDGET}])
    await support.apply_defaults(emulated, before)
    await emulated.client.create(
        workloads.DEPLOYMENTS, support.deployment("planned", NODES, cpu="500m", spec_extra=APART)
    )
    await support.eventually(
        lambda: support.all_bound(emulated, "planned", NODES), clock=clock, within=60, what="planned bound"
    )

    async def stamped() -> list[dict[str, Any]] | None:
        found = await support.claims(emulated)
        hashed = all(labels.ANNOTATION_NODEPOOL_HASH in c["metadata"].get("annotations", {}) for c in found)
        return found if len(found) == NODES and hashed else None

    old = {c["metadata"]["name"] for c in await support.eventually(stamped, clock=clock, within=30, what="hashes")}

    after = support.pool(consolidate_after="Never", budgets=[{"nodes": BUDGET}], expire_after="360h")
    proposal = tmp_path / "proposal.yaml"
    proposal.write_text(yaml.safe_dump(after))
    request = command.Request(proposal=(str(proposal),), kubeconfig=str(emulated.kubeconfig), now=clock.now())
    doc = await asyncio.to_thread(command.plan_json, request)
    said = {n["nodeclaim"] for n in doc["nodes"] if n["outcome"] == "drifts"}
    (pool,) = doc["nodepools"]
    assert said == old
    assert (pool["drifts"], pool["largest_wave"], len(pool["waves"])) == (NODES, 2, 2)
    assert {n["reason"] for n in doc["nodes"]} == {"NodePoolDrifted"}

    drifted: set[str] = set()

    async def probe() -> list[str]:
        found, node_list = await support.claims(emulated), await support.nodes(emulated)
        drifted.update(
            c["metadata"]["name"] for c in found if (support.condition(c, "Drifted") or {}).get("status") == "True"
        )
        return support.disrupting(found, node_list)

    async def replaced() -> list[dict[str, Any]] | None:
        names = {c["metadata"]["name"] for c in await support.claims(emulated)}
        bound = await support.all_bound(emulated, "planned", NODES)
        return bound if bound and len(names) == NODES and not names & old else None

    async with support.Sampler(probe, clock=clock) as sampler:
        body = {"spec": {"template": {"spec": {"expireAfter": "360h"}}}}
        await emulated.client.patch(resources.NODEPOOLS, "default", body)
        await support.eventually(replaced, clock=clock, within=120, what="every planned node replaced")

    assert drifted & old == said
    most = max(len(s) for s in sampler.samples)
    assert 0 < most <= pool["largest_wave"], f"{most} disrupted at once: {max(sampler.samples, key=len)}"
