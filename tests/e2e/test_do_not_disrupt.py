"""do-not-disrupt end to end, each form blocking then released within one test (so the same node is shown to be
disruptable once the annotation goes, and a controller ignoring the annotation fails the hold):

* a pod annotated `karpenter.sh/do-not-disrupt: "true"` keeps its Consolidatable node from being replaced by a
  cheaper one until the annotation is removed from the pod;
* a Node annotated `karpenter.sh/do-not-disrupt: "true"` keeps its Drifted NodeClaim from being replaced until the
  annotation is removed from the Node;
* a deleted NodeClaim whose pod cannot be evicted (do-not-disrupt, or a PDB of maxUnavailable 0) gets no replacement
  while the pod cannot leave, so no node stands empty beside it (core #2033, IsCurrentlyReschedulable); once it can,
  the pod is evicted onto a new node and the old one goes.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads

DO_NOT_DISRUPT = {labels.ANNOTATION_DO_NOT_DISRUPT: "true"}
HOLD = 8.0
"""Seconds the annotated node must stay once disruptable: more than a disruption poll (1 s) + the validation delay
(2 s) + launching the replacement, after which an ignored annotation shows as a taint or a new NodeClaim."""


def _untouched(samples: list[tuple[frozenset[str], tuple[str, ...]]], name: str) -> None:
    assert samples, "nothing sampled"
    for names, disrupting in samples:
        assert names == {name}, f"a NodeClaim was launched or removed while {name} was protected: {sorted(names)}"
        assert not disrupting, f"{disrupting} disrupted while protected"


async def _only_claim(emulated: cluster.EmulatedCluster, *, besides: str) -> dict[str, Any] | None:
    claims = await support.claims(emulated)
    if len(claims) == 1 and claims[0]["metadata"]["name"] != besides and claims[0]["status"].get("nodeName"):
        return claims[0]
    return None


async def _guarded_moved(emulated: cluster.EmulatedCluster, *, besides: str) -> dict[str, Any] | None:
    """The one NodeClaim but `besides`, once the "guarded" pod is bound to its node."""
    found = await _only_claim(emulated, besides=besides)
    bound = await support.all_bound(emulated, "guarded", 1)
    return found if found and bound and bound[0]["spec"]["nodeName"] == found["status"]["nodeName"] else None


@pytest.mark.slow
async def test_a_do_not_disrupt_pod_keeps_its_node_from_consolidation_until_removed(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated)
    guarded = support.deployment("guarded", 1, cpu="500m")
    guarded["spec"]["template"]["metadata"]["annotations"] = dict(DO_NOT_DISRUPT)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("big", 1, cpu="6"))
    await emulated.client.create(workloads.DEPLOYMENTS, guarded)
    await support.eventually(
        lambda: support.all_bound(emulated, "big", 1), clock=emulated.clock, within=40, what="big bound"
    )
    (pod,) = await support.eventually(
        lambda: support.all_bound(emulated, "guarded", 1), clock=emulated.clock, within=20, what="guarded"
    )
    (claim,) = await support.claims(emulated)
    name = claim["metadata"]["name"]
    await support.scale(emulated, "big", 0)  # what is left fits a cheaper node: consolidation would replace it

    async def consolidatable() -> bool:
        claims = await support.claims(emulated)
        gone = not await support.pods_of(emulated, "big")
        return gone and any(support.is_true(c, "Consolidatable") for c in claims if c["metadata"]["name"] == name)

    await support.eventually(
        consolidatable, clock=emulated.clock, within=20, what=f"{name} Consolidatable with only the guarded pod"
    )
    _untouched(await support.hold(emulated, HOLD), name)

    annotation_removed = {"metadata": {"annotations": {labels.ANNOTATION_DO_NOT_DISRUPT: None}}}
    await emulated.client.patch(resources.PODS, pod["metadata"]["name"], annotation_removed, namespace="default")

    await support.eventually(
        lambda: _guarded_moved(emulated, besides=name),
        clock=emulated.clock,
        within=40,
        what="the released node replaced",
    )


@pytest.mark.slow
async def test_a_do_not_disrupt_node_is_not_drifted_until_removed(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await support.apply_defaults(emulated, support.pool(consolidate_after="Never"))
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("steady", 1, cpu="500m"))
    await support.eventually(
        lambda: support.all_bound(emulated, "steady", 1), clock=emulated.clock, within=40, what="steady bound"
    )
    (claim,) = await support.claims(emulated)
    name, node_name = claim["metadata"]["name"], claim["status"]["nodeName"]
    await emulated.client.patch(resources.NODES, node_name, {"metadata": {"annotations": DO_NOT_DISRUPT}})
    new_image = await support.register_image(emulated, "al2023-next")
    await support.select_image(emulated, new_image)

    async def drifted() -> bool:
        return any(support.is_true(c, "Drifted") for c in await support.claims(emulated))

    await support.eventually(drifted, clock=emulated.clock, within=20, what=f"{name} Drifted")
    _untouched(await support.hold(emulated, HOLD), name)

    await emulated.client.patch(
        resources.NODES, node_name, {"metadata": {"annotations": {labels.ANNOTATION_DO_NOT_DISRUPT: None}}}
    )

    async def replaced() -> dict[str, Any] | None:
        found = await _only_claim(emulated, besides=name)
        images = await support.instance_images(emulated)
        bound = await support.all_bound(emulated, "steady", 1)
        return found if found and bound and images.get(support.instance_id(found)) == new_image else None

    await support.eventually(
        replaced, clock=emulated.clock, within=40, what="the released node replaced on the new image"
    )


NEVER = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "guarded", "namespace": "default"},
    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
}


@pytest.mark.slow
@pytest.mark.parametrize("blocker", ["do-not-disrupt", "pdb"])
async def test_a_deleted_node_buys_no_capacity_for_a_pod_that_cannot_leave(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane, blocker: str
) -> None:
    await support.apply_defaults(emulated)
    guarded = support.deployment("guarded", 1, cpu="500m")
    if blocker == "pdb":
        await emulated.client.create(resources.PDBS, NEVER)
    else:
        guarded["spec"]["template"]["metadata"]["annotations"] = dict(DO_NOT_DISRUPT)
    await emulated.client.create(workloads.DEPLOYMENTS, guarded)
    (pod,) = await support.eventually(
        lambda: support.all_bound(emulated, "guarded", 1), clock=emulated.clock, within=40, what="guarded bound"
    )
    (claim,) = await support.claims(emulated)
    name = claim["metadata"]["name"]
    await emulated.client.delete(resources.NODECLAIMS, name)

    samples = await support.hold(emulated, HOLD)
    assert samples, "nothing sampled"
    for names, _ in samples:
        assert names == {name}, f"capacity bought for a pod that cannot leave {name}: {sorted(names)}"
    assert [p["metadata"]["name"] for p in await support.pods_of(emulated, "guarded")] == [pod["metadata"]["name"]]

    if blocker == "pdb":
        await emulated.client.delete(resources.PDBS, "guarded", namespace="default")
    else:
        annotation_removed = {"metadata": {"annotations": {labels.ANNOTATION_DO_NOT_DISRUPT: None}}}
        await emulated.client.patch(resources.PODS, pod["metadata"]["name"], annotation_removed, namespace="default")

    await support.eventually(
        lambda: _guarded_moved(emulated, besides=name),
        clock=emulated.clock,
        within=60,
        what="the pod moved and the old node gone",
    )
