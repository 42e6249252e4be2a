"""PodDisruptionBudgets end to end: a Deployment of four pods on two drifting nodes, under a PDB of maxUnavailable 1.

The disruption-controller stand-in keeps the PDB's status.disruptionsAllowed (which the controller's candidates
read, as upstream's do: without it no node would be disrupted at all); the API server's Eviction API answers from
the live pods. The test follows every change of the pods through a watch and proves that at no moment more than one
of them was unhealthy; from the API server's eviction log, that evictions beyond the budget were refused with 429
and retried until allowed, and that every original pod left through exactly one allowed eviction (a pod deleted
behind the Eviction API's back would show as a missing eviction, and as a second unhealthy pod).
"""

from __future__ import annotations

import collections

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads

REPLICAS = 4
MAX_UNAVAILABLE = 1
TWO_VCPU = {"key": labels.LABEL_INSTANCE_CPU, "operator": "In", "values": ["2"]}
PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "guarded", "namespace": "default"},
    "spec": {"maxUnavailable": MAX_UNAVAILABLE, "selector": {"matchLabels": {"app": "guarded"}}},
}


@pytest.mark.slow
async def test_draining_drifted_nodes_never_violates_the_pdb(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    # Two 700m pods per 2-vCPU node: the four pods span two nodes, each drained with two of them on it.
    await support.apply_defaults(
        emulated, support.pool(requirements=[TWO_VCPU], consolidate_after="Never", budgets=[{"nodes": "1"}])
    )
    await emulated.client.create(resources.PDBS, PDB)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("guarded", REPLICAS, cpu="700m"))
    originals = await support.eventually(
        lambda: support.all_bound(emulated, "guarded", REPLICAS), clock=emulated.clock, within=45, what="guarded bound"
    )
    old_claims = {c["metadata"]["name"] for c in await support.claims(emulated)}
    assert len(old_claims) == 2
    assert len({p["spec"]["nodeName"] for p in originals}) == 2

    async def allowed_by_status() -> bool:
        pdb = await emulated.client.get(resources.PDBS, "guarded", namespace="default")
        return pdb is not None and (pdb.get("status") or {}).get("disruptionsAllowed") == MAX_UNAVAILABLE

    await support.eventually(
        allowed_by_status, clock=emulated.clock, within=15, what="the PDB status to allow one disruption"
    )
    already = len(emulated.api.evictions)
    new_image = await support.register_image(emulated, "al2023-next")

    async def moved() -> bool:
        claims = await support.claims(emulated)
        pods = await support.pods_of(emulated, "guarded")
        healthy = [p for p in pods if support.is_true(p, "Ready")]
        return len(claims) == 2 and not {c["metadata"]["name"] for c in claims} & old_claims and len(healthy) == 4

    async with support.HealthyPods(emulated, "guarded") as health:
        assert health.series == [REPLICAS]
        await support.select_image(emulated, new_image)
        await support.eventually(
            moved, clock=emulated.clock, within=60, what="both nodes replaced and the pods healthy again"
        )

    assert min(health.series) == REPLICAS - MAX_UNAVAILABLE, f"healthy pods went {health.series}"
    evictions = [e for e in emulated.api.evictions[already:] if e.budgets == ("guarded",)]
    allowed = collections.Counter(e.name for e in evictions if e.allowed)
    refused = [e for e in evictions if e.code == 429]
    assert allowed == {p["metadata"]["name"]: 1 for p in originals}, "every original pod leaves by one eviction"
    assert refused, "two pods drained from one node at once: the second must have been refused"
    for refusal in refused:
        assert any(e.allowed and e.name == refusal.name and e.at >= refusal.at for e in evictions)
    assert not [e for e in emulated.api.evictions[already:] if not e.allowed and e.code != 429]
