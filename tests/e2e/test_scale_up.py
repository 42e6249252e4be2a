"""Scale-up end to end: pending pods with zonal spread, a zone selector, hostname anti-affinity, zonal pod affinity and
required node affinity get NodeClaims from the controller (`karpy run`'s own path, Kopf included), instances in moto,
Nodes from the kubelet stand-in, and are bound by the scheduler stand-in with every constraint honoured; scaled to
zero, emptiness removes every node and terminates every instance."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import AsyncIterator

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy_emulator import cluster, controlplane, workloads

ZONE_SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": labels.LABEL_ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }
    ]
}
ONE_PER_HOST = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "lonely"}}}
            ]
        }
    }
}

WITH_STATEFUL = {
    "affinity": {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_ZONE, "labelSelector": {"matchLabels": {"app": "stateful"}}}
            ]
        }
    }
}
MEMORY_OPTIMIZED = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": labels.LABEL_INSTANCE_CATEGORY, "operator": "In", "values": ["r"]}]}
                ]
            }
        }
    }
}


@pytest.fixture
async def controller(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    """`karpy run`'s whole path: `app.run` with its metrics and health servers."""
    async with controlplane.ControlPlane(emulated, dataclasses.replace(support.FAST, run_app=True)) as running:
        yield running


@pytest.mark.slow
async def test_constrained_workloads_scale_up_then_empty_nodes_go(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    zones = await support.zones(emulated)
    assert len(zones) == 3
    api = emulated.client
    await support.apply_defaults(emulated)
    # A zonal workload through a zone selector (volume topology has its own end-to-end test: test_volume_zone.py).
    pinned = {"nodeSelector": {labels.LABEL_ZONE: zones[1]}}
    for body in (
        support.deployment("spread", 6, spec_extra=ZONE_SPREAD),
        support.deployment("lonely", 3, cpu="500m", spec_extra=ONE_PER_HOST),
        support.deployment("stateful", 1, spec_extra=pinned),
        support.deployment("follower", 2, cpu="500m", spec_extra=WITH_STATEFUL),
        support.deployment("memory", 1, spec_extra=MEMORY_OPTIMIZED),
    ):
        await api.create(workloads.DEPLOYMENTS, body)

    spread = await support.eventually(
        lambda: support.all_bound(emulated, "spread", 6), clock=emulated.clock, within=60, what="spread"
    )
    lonely = await support.eventually(
        lambda: support.all_bound(emulated, "lonely", 3), clock=emulated.clock, within=30, what="lonely"
    )
    (stateful,) = await support.eventually(
        lambda: support.all_bound(emulated, "stateful", 1), clock=emulated.clock, within=30, what="stateful"
    )
    follower = await support.eventually(
        lambda: support.all_bound(emulated, "follower", 2), clock=emulated.clock, within=30, what="follower"
    )
    (memory,) = await support.eventually(
        lambda: support.all_bound(emulated, "memory", 1), clock=emulated.clock, within=30, what="memory"
    )
    by_name = {n["metadata"]["name"]: n for n in await support.nodes(emulated)}
    per_zone = collections.Counter(support.node_zone(by_name, p) for p in spread)
    assert set(per_zone) == set(zones)
    assert max(per_zone.values()) - min(per_zone.values()) <= 1
    assert len({p["spec"]["nodeName"] for p in lonely}) == 3
    assert support.node_zone(by_name, stateful) == zones[1]
    assert {support.node_zone(by_name, p) for p in follower} == {zones[1]}  # required pod affinity to stateful's zone
    memory_node = by_name[memory["spec"]["nodeName"]]
    assert memory_node["metadata"]["labels"][labels.LABEL_INSTANCE_CATEGORY] == "r"  # required node affinity
    # every NodeClaim went through the whole lifecycle and names its instance
    for claim in await support.claims(emulated):
        conditions = {c["type"]: c["status"] for c in claim["status"]["conditions"]}
        assert conditions["Launched"] == conditions["Registered"] == conditions["Initialized"] == "True"
        assert claim["status"]["providerID"].startswith("aws:///")
    assert len(await support.running_instances(emulated)) == len(by_name)

    for name in ("spread", "lonely", "stateful", "follower", "memory"):
        await support.scale(emulated, name, 0)
    # The default budget (10% of nodes, rounded up) lets emptiness take one node per round: ~35 s for three here.
    await support.eventually(
        lambda: support.nothing_left(emulated), clock=emulated.clock, within=60, what="every node removed"
    )
