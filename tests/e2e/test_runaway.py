"""No runaway: an agent outside karpy (a node problem detector, a security scanner) taints every node the workload
lands on `NoExecute`, so its pod is evicted again and again and karpy provisions again and again. The tainted nodes
are left empty; consolidation (WhenEmptyOrUnderutilized) or emptiness alone (WhenEmpty) must remove them as fast as
they come, so the number of nodes stays bounded, and once the workload is deleted every NodeClaim, Node and instance
goes.

The agent is this test, over the API server: it taints the node, then evicts the pods that do not tolerate the
taint, as the taint manager of kube-controller-manager would (the emulation's kubelet does not)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e import support

from karpy.kube import client, resources
from karpy_emulator import cluster, controlplane, workloads

APP = "victim"
TAINT = {"key": "example.com/quarantined", "value": "true", "effect": "NoExecute"}
MAX_NODES = 10
"""At most this many nodes at once. A cycle (batch, launch, boot, taint, eviction) brings a node every ~5.5 s, and
an empty node goes after consolidateAfter (2 s), a disruption poll and the validation period (support.FAST), all of
them at once under a budget of 100 %: measured 4 to 7 nodes at once over 120 s, where nothing removing them would
reach about 22. (Under upstream's default budget, 10 % of the nodes rounded up, the count climbs until that budget
drains nodes as fast as they come: each one holds it from its marking until its instance terminates, MinDrainTime
(5 s) included, as upstream's BuildDisruptionBudgetMapping counts. For one 500m pod it levels off at 22 to 23 nodes,
a budget of 3, from 180 s to 420 s, measured.)"""
RUN_FOR = 120.0
"""Virtual seconds of churn: about twenty cycles."""


class Quarantine:
    """The agent: taints each node the workload is bound to, evicts the workload's pods from tainted nodes; counts
    nodes on the way."""

    def __init__(self, emulated: cluster.EmulatedCluster) -> None:
        self._api = emulated.client
        self._emulated = emulated
        self.tainted: set[str] = set()
        self.evicted = 0

    async def step(self) -> int:
        nodes = await support.nodes(self._emulated)
        for pod in await support.pods_of(self._emulated, APP):
            node = pod["spec"].get("nodeName")
            if not node:
                continue
            if node not in self.tainted:
                await self._taint(node)
            if await self._api.evict("default", pod["metadata"]["name"]) is client.EvictionOutcome.EVICTED:
                self.evicted += 1
        return len(nodes)

    async def _taint(self, name: str) -> None:
        node = await self._api.get(resources.NODES, name)
        if node is None:
            return
        taints = (node.get("spec") or {}).get("taints")
        # A JSON patch guarded by the resourceVersion: karpy's own taints (karpenter.sh/disrupted) stay.
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]}
        ]
        ops.append(
            {"op": "add", "path": "/spec/taints/-", "value": TAINT}
            if taints
            else {"op": "add", "path": "/spec/taints", "value": [TAINT]}
        )
        try:
            await self._api.patch(resources.NODES, name, ops)
        except (client.Conflict, client.Invalid, client.NotFound):
            return  # changed meanwhile (or gone): tainted at the next step
        self.tainted.add(name)


@pytest.mark.slow
@pytest.mark.timeout(600)  # two virtual minutes of constant churn: ~150 s wall at a load average of 20
@pytest.mark.parametrize("policy", ["WhenEmptyOrUnderutilized", "WhenEmpty"])
async def test_a_workload_evicted_from_every_new_node_does_not_run_away(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane, policy: str
) -> None:
    await support.apply_defaults(
        emulated, support.pool(consolidate_after="2s", policy=policy, budgets=[{"nodes": "100%"}])
    )
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment(APP, 1, cpu="500m"))
    agent = Quarantine(emulated)
    seen_claims: set[str] = set()

    async def probe() -> int:
        seen_claims.update(c["metadata"]["name"] for c in await support.claims(emulated))
        return await agent.step()

    async with support.Sampler(probe, clock=emulated.clock, every=0.5) as sampler:
        await emulated.clock.sleep(RUN_FOR)

    assert agent.evicted >= 10, f"the workload was evicted {agent.evicted} times: not the churn this test needs"
    assert len(seen_claims) >= 10
    most = max(sampler.samples)
    assert most <= MAX_NODES, f"{most} nodes at once (samples: {sampler.samples})"

    await emulated.client.delete(workloads.DEPLOYMENTS, APP, namespace="default")
    await support.eventually(
        lambda: support.nothing_left(emulated), clock=emulated.clock, within=120, what="every NodeClaim, Node, instance"
    )
