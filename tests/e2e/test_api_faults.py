"""The controller against an API server that fails a share of its requests (`karpy_emulator.apiserver.faults`:
500, 503, 429 with Retry-After, reset connections, slow answers, watches closed early, 410 on resume, 409 on
updates and patches), at 5 % and 20 %, seeded: scale-up, consolidation, drift, a spot interruption and a leader
change, then the workload deleted.

Only the controller's requests fail (the stand-ins and this test read a reliable server), so every invariant is
about karpy: every pod bound at the end of each step, no instance launched twice for a NodeClaim nor left running,
no pod of the PodDisruptionBudget evicted past it and none deleted around the Eviction API, no NodeClaim or Node
(and so no finalizer) left behind, and a replica that ends only by losing the Lease."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Any

import boto3
import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy.runtime import lease as runtime_lease
from karpy_emulator import cluster, controlplane, workloads
from karpy_emulator.apiserver import disruption as apiserver_disruption
from karpy_emulator.apiserver import faults

APP = "web"
REPLICAS = 4
SEED = 28
ONE_PER_HOST = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": APP}}}
            ]
        }
    }
}
PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": APP, "namespace": "default"},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
}


def _instances(emulated: cluster.EmulatedCluster) -> dict[str, str]:
    """Every cluster instance ever launched (terminated included) -> its NodeClaim tag ("" until the tagger ran)."""
    ec2 = boto3.client("ec2", region_name=emulated.region)
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{emulated.cluster_name}", "Values": ["owned"]}]
    )
    found: dict[str, str] = {}
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags") or ()}
                found[instance["InstanceId"]] = tags.get(labels.TAG_NODECLAIM, "")
    return found


def _mix(rate: float) -> faults.Mix:
    return faults.Mix(rate=rate, users=frozenset({controlplane.CONTROLLER_USER}), seed=SEED)


@pytest.mark.slow
@pytest.mark.timeout(600)  # five disruptions in a row on a shared 2-core machine; virtual time bounds each step
@pytest.mark.parametrize(
    "rate",
    [
        pytest.param(0.05, marks=pytest.mark.cluster(api_faults=_mix(0.05)), id="5pct"),
        pytest.param(0.20, marks=pytest.mark.cluster(api_faults=_mix(0.20)), id="20pct"),
    ],
)
async def test_the_controller_keeps_its_invariants_when_the_api_server_fails(
    emulated: cluster.EmulatedCluster, rate: float
) -> None:
    layer = emulated.api.fault_layer
    assert layer is not None
    assert layer.mix.rate == rate
    await _scenario(emulated)


async def _scenario(emulated: cluster.EmulatedCluster) -> None:
    clock = emulated.clock
    await support.apply_defaults(emulated, support.pool(consolidate_after="2s"))
    await emulated.client.create(resources.PDBS, PDB)
    replica = dataclasses.replace(support.FAST, leader_election=True)
    planes = [controlplane.ControlPlane(emulated, dataclasses.replace(replica, identity=name)) for name in ("a", "b")]
    healthy: list[int] = []
    launched: dict[str, set[str]] = collections.defaultdict(set)  # NodeClaim -> instances its status ever named

    async def record_launches() -> None:
        for claim in await support.claims(emulated):
            if instance := support.instance_id(claim):
                launched[claim["metadata"]["name"]].add(instance)

    async def probe() -> None:
        pods = await support.pods_of(emulated, APP)
        healthy.append(sum(1 for pod in pods if apiserver_disruption.is_healthy(pod)))

    async def bound(replicas: int) -> list[dict[str, Any]] | support.Unmet:
        return await support.all_bound(emulated, APP, replicas)

    # Sampled through the whole run: which instance each NodeClaim's status named, to find second launches.
    async with support.Sampler(record_launches, clock=clock, every=0.5):
        try:
            planes[0].start()
            await support.eventually(lambda: _leader(planes), clock=clock, within=60, what="a leader")
            planes[1].start()

            # Scale-up: one node per pod.
            await emulated.client.create(
                workloads.DEPLOYMENTS, support.deployment(APP, REPLICAS, cpu="500m", spec_extra=ONE_PER_HOST)
            )
            await support.eventually(lambda: bound(REPLICAS), clock=clock, within=180, what="the scale-up")

            # Consolidation: two pods go, their nodes empty and go too.
            await support.scale(emulated, APP, REPLICAS - 2)

            async def consolidated() -> bool:
                return bool(await bound(REPLICAS - 2)) and len(await support.claims(emulated)) == REPLICAS - 2

            await support.eventually(consolidated, clock=clock, within=240, what="the empty nodes consolidated")

            # Drift, then an interruption, under the budget: at most one pod unavailable at a time.
            async with support.Sampler(probe, clock=clock):
                before = {c["metadata"]["name"] for c in await support.claims(emulated)}
                new_image = await support.register_image(emulated, "al2023-next")
                await support.select_image(emulated, new_image)

                async def drifted() -> bool:
                    claims = await support.claims(emulated)
                    images = await support.instance_images(emulated)
                    replaced = not {c["metadata"]["name"] for c in claims} & before
                    on_new = all(images.get(support.instance_id(c)) == new_image for c in claims)
                    return replaced and on_new and len(claims) == REPLICAS - 2 and bool(await bound(REPLICAS - 2))

                await support.eventually(drifted, clock=clock, within=420, what="every node replaced on the new image")

                victim = (await support.claims(emulated))[0]
                await support.spot_interruption_warning(emulated, support.instance_id(victim))

                async def interrupted() -> bool | support.Unmet:
                    names = {c["metadata"]["name"] for c in await support.claims(emulated)}
                    instances = await support.running_instances(emulated)
                    pods = await bound(REPLICAS - 2)
                    unmet = [
                        *(["the victim NodeClaim still listed"] if victim["metadata"]["name"] in names else []),
                        *(["its instance still running"] if support.instance_id(victim) in instances else []),
                        *([repr(pods)] if not pods else []),
                    ]
                    return support.Unmet("; ".join(unmet)) if unmet else True

                await support.eventually(interrupted, clock=clock, within=240, what="the interrupted node replaced")
            assert healthy
            assert min(healthy) >= REPLICAS - 2 - 1, f"the budget allows one pod down: {sorted(healthy)[:5]}"

            # Leader change: the leader crashes, the other takes over and provisions the next pods.
            (leader,) = [p for p in planes if p.leading]
            await leader.kill()
            survivor = next(p for p in planes if p is not leader)
            await support.eventually(
                lambda: _leader([survivor]), clock=clock, within=runtime_lease.LEASE_DURATION + 60, what="the takeover"
            )
            await support.scale(emulated, APP, REPLICAS)
            await support.eventually(lambda: bound(REPLICAS), clock=clock, within=180, what="the scale-up after it")

            # Everything goes with the workload.
            await emulated.client.delete(workloads.DEPLOYMENTS, APP, namespace="default")
            await support.eventually(
                lambda: support.nothing_left(emulated), clock=clock, within=300, what="every NodeClaim, Node, instance"
            )
            # The survivor only ever ended by losing the Lease (and came back as a follower): never by an error.
            assert survivor.task is not None
            assert not survivor.task.done()
        finally:
            for plane in planes:
                await plane.stop()

    layer = emulated.api.fault_layer
    assert layer is not None
    # Watches are few and long-lived, so their faults are rare at 5 %; every request kind is hit at either rate.
    answered = {faults.Kind.SERVER_ERROR, faults.Kind.UNAVAILABLE, faults.Kind.THROTTLED, faults.Kind.RESET}
    assert set(layer.hits) >= answered | {faults.Kind.SLOW, faults.Kind.CONFLICT}, dict(layer.hits)
    twice = {claim: ids for claim, ids in launched.items() if len(ids) > 1}
    assert not twice, f"NodeClaims launched more than once: {twice}"
    owner = {instance: claim for claim, ids in launched.items() for instance in ids}
    instances = await asyncio.to_thread(_instances, emulated)
    for instance, tag in instances.items():
        assert tag in ("", owner.get(instance)), f"{instance} is tagged {tag} but was {owner.get(instance)}'s"
    orphans = sorted(set(instances) - set(owner))
    assert not orphans, f"instances no NodeClaim ever named (a second launch, or a lost one): {orphans}"
    deleted_pods = [a for a in emulated.api.accesses.snapshot() if a.user == controlplane.CONTROLLER_USER]
    assert not [a for a in deleted_pods if a.resource == "pods" and a.verb == "delete"], "a pod deleted, not evicted"


async def _leader(planes: list[controlplane.ControlPlane]) -> bool:
    return any(p.leading for p in planes)
