"""Taking over a cluster from upstream Karpenter v1.14 without touching a node (README "Coming from upstream
Karpenter"), on one self-driving virtual clock.

The cluster is as upstream leaves it (`upstream_cluster`): NodePools, EC2NodeClasses and NodeClaims stamped with
upstream's hashes and versions, finalizers and conditions, Nodes registered, instances in moto with upstream's
tags, one pod per node. One EC2NodeClass sets a kubelet field the kubelet no longer knows (`imagePullProgressDeadline`,
beside `serializeImagePulls`, which AL2023 passes on): karpy reads it, reports it not Ready and launches nothing from
it, and leaves its node alone. karpy then runs for 30
virtual minutes: no NodeClaim is created, drifted, disrupted or deleted, no instance terminated, no finalizer left
on a deleting object; every claim is re-stamped with karpy's hash versions. After that, scale-up, consolidation and
drift work as usual, and every NodePool, NodeClaim and EC2NodeClass karpy leaves is one upstream's CRDs accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tests.api import crd_check
from tests.e2e import support, upstream_cluster

from karpy.api import labels
from karpy.kube import client, resources
from karpy_emulator import autojump, cluster, controlplane

TAKEOVER = 1800.0
"""Virtual seconds karpy runs before anything changes: 30 minutes, six drift checks, every resync many times."""
UPSTREAM = controlplane.Options(interruption=False)
WEB = upstream_cluster.PoolSpec(name="web", nodeclass="default", nodes=3, template_labels={"team": "web"})
LEGACY = upstream_cluster.PoolSpec(
    name="legacy",
    nodeclass="legacy",
    nodes=1,
    taints=({"key": "legacy", "value": "true", "effect": "NoSchedule"},),
    kubelet={"maxPods": 29, "serializeImagePulls": False, "imagePullProgressDeadline": "2m"},
)


pytestmark = pytest.mark.cluster(boot_delay=5.0, interval=5.0)


async def _everything(emulated: cluster.EmulatedCluster) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for res in (resources.NODEPOOLS, resources.NODECLAIMS, resources.EC2NODECLASSES, resources.NODES):
        out[res.plural], _ = await emulated.client.list(res)
    return out


class Touched(support.Following):
    """Every NodeClaim that was, at any state the API server went through, Drifted or deleting, and every Node that
    was tainted for disruption (a watch, not a sample: nothing is missed between two looks)."""

    def __init__(self, emulated: cluster.EmulatedCluster, res: resources.Resource) -> None:
        super().__init__(emulated, res)
        self.names: set[str] = set()

    def _observe(self, obj: Mapping[str, Any]) -> None:
        taints = (obj.get("spec") or {}).get("taints") or ()
        if (
            support.is_true(obj, "Drifted")
            or obj["metadata"].get("deletionTimestamp")
            or any(t.get("key") == labels.TAINT_DISRUPTED_KEY for t in taints)
        ):
            self.names.add(str(obj["metadata"]["name"]))

    def listed(self, items: Sequence[Mapping[str, Any]]) -> None:
        for obj in items:
            self._observe(obj)

    def seen(self, event: client.WatchEvent) -> None:
        self._observe(event.object)


@pytest.mark.slow
# The longest e2e scenario (35 virtual minutes): about 100 s of real time at a load average of 5, 190 s at 10.
@pytest.mark.timeout(900)
async def test_karpy_takes_over_an_upstream_cluster_without_touching_a_node(
    emulated: cluster.EmulatedCluster,
) -> None:
    clock = emulated.clock
    assert isinstance(clock, autojump.AutojumpClock)
    fleet = await upstream_cluster.populate(emulated, [WEB, LEGACY])
    before = await _everything(emulated)

    async with controlplane.ControlPlane(emulated, UPSTREAM), support.NamesSeen(emulated, resources.NODECLAIMS) as seen:
        async with Touched(emulated, resources.NODECLAIMS) as claims, Touched(emulated, resources.NODES) as nodes:
            await clock.sleep(TAKEOVER)  # 30 virtual minutes under karpy
        touched = claims.names | nodes.names

        # -- 30 minutes on: nothing touched -------------------------------------------------------------------------
        after = await _everything(emulated)
        assert touched == set(), f"claims drifted or disrupted after the take-over: {sorted(touched)}"
        assert seen.names == set(fleet.claims), "karpy created or replaced NodeClaims on a cluster at rest"
        assert {c["metadata"]["name"] for c in after["nodeclaims"]} == set(fleet.claims)
        assert fleet.instances <= set(await support.running_instances(emulated)), "an upstream instance was terminated"
        for kind, items in after.items():
            stuck = [o["metadata"]["name"] for o in items if o["metadata"].get("deletionTimestamp")]
            assert not stuck, f"{kind} left deleting: {stuck}"
        for claim in after["nodeclaims"]:  # re-stamped, not drifted, and still upstream's claims
            annotations = claim["metadata"]["annotations"]
            assert annotations[labels.ANNOTATION_NODEPOOL_HASH_VERSION] == labels.NODEPOOL_HASH_VERSION
            assert annotations[labels.ANNOTATION_EC2NODECLASS_HASH_VERSION] == labels.EC2NODECLASS_HASH_VERSION
            assert labels.FINALIZER_TERMINATION in claim["metadata"]["finalizers"]
        assert {n["metadata"]["name"] for n in after["nodes"]} == {n["metadata"]["name"] for n in before["nodes"]}
        legacy = next(c for c in after["ec2nodeclasses"] if c["metadata"]["name"] == "legacy")
        validation = support.condition(legacy, "ValidationSucceeded")
        assert validation is not None
        assert validation["status"] == "False"
        assert validation["reason"] == "InvalidKubeletConfiguration"
        assert validation["message"] == "spec.kubelet.imagePullProgressDeadline: unknown kubelet configuration field"
        assert legacy["spec"]["kubelet"] == LEGACY.kubelet  # kept as upstream stored it

        # -- then karpy works as usual: scale-up, consolidation, drift ---------------------------------------------
        await support.scale(emulated, WEB.name, 5)
        await support.eventually(
            lambda: support.all_bound(emulated, WEB.name, 5), clock=emulated.clock, within=60, what="scale-up"
        )
        grown = {c["metadata"]["name"] for c in await support.claims(emulated)}
        assert len(grown - set(fleet.claims)) == 2

        await support.scale(emulated, WEB.name, 3)

        async def consolidated() -> bool:
            names = {c["metadata"]["name"] for c in await support.claims(emulated)}
            return len(names) == len(fleet.claims) and bool(await support.all_bound(emulated, WEB.name, 3))

        # Virtual seconds: 1 min consolidateAfter, then one node at a time (the 10% budget of five nodes is one), each
        # up to a 10 s poll, the 15 s validation and its termination: about 140 s, bounded at twice that.
        await support.eventually(
            consolidated, clock=emulated.clock, within=300, what="the two emptied nodes consolidated"
        )

        new_image = await support.register_image(emulated, "al2023-next")
        await support.select_image(emulated, new_image)
        legacy_claim = fleet.pools[LEGACY.name][0]

        async def web_on_the_new_image() -> bool:
            claims = await support.claims(emulated)
            images = await support.instance_images(emulated)
            web = [c for c in claims if c["metadata"]["labels"].get(labels.LABEL_NODEPOOL) == WEB.name]
            fresh = all(images.get(support.instance_id(c)) == new_image for c in web)
            return len(web) == WEB.nodes and fresh and bool(await support.all_bound(emulated, WEB.name, 3))

        # One node at a time again, each a launch (5 s boot), an initialization, a drain and a termination.
        await support.eventually(
            web_on_the_new_image, clock=emulated.clock, within=600, what="web's nodes replaced on the new image"
        )
        final = await _everything(emulated)

    # The legacy pool's node, on a class karpy cannot launch from, is still the one upstream left.
    assert legacy_claim in {c["metadata"]["name"] for c in final["nodeclaims"]}
    assert fleet.claims[legacy_claim][0] in set(await support.running_instances(emulated))
    # Everything karpy leaves behind is an object upstream's CRDs accept (karpy's CRDs are upstream's, node for node:
    # tests/api/test_upstream_crds.py), status included.
    for kind in ("nodepools", "nodeclaims", "ec2nodeclasses"):
        for obj in final[kind]:
            assert crd_check.schema_verdict(obj), f"{kind}/{obj['metadata']['name']} would not be stored upstream"
