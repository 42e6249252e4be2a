"""Isolation on the emulation: bad objects and poison messages affect only themselves.

The emulated API server here stores what karpy's CRDs refuse (as a cluster running other CRDs does). Into a
running cluster go a NodePool karpy cannot parse, pods it cannot read (pending, and bound to a node), a pod no
instance type can hold, a NodeClaim made unreadable under a running node, and poison messages beside a spot
warning. The controller keeps serving: the good workloads are provisioned, the spot node is drained and replaced,
every poison message is dropped, every bad object is reported, and the instance of the unreadable NodeClaim keeps
running past garbage collection's grace (nothing is destroyed on the strength of what cannot be read)."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest
from tests import builders
from tests.e2e import support

from karpy.api import labels
from karpy.kube import resources
from karpy.nodeclaim import garbagecollection
from karpy_emulator import cluster, controlplane, workloads
from karpy_emulator.aws import seeding

POISON = (
    '{"source": "aws.health", "detail-type": "AWS Health Event", "detail": {"affectedEntities": 5}}',
    "[" * 120_000 + "]" * 120_000,
    '{"id": ' + "9" * 5000 + "}",
)


def _pinned(name: str, pool: str) -> dict[str, Any]:
    return support.deployment(name, 1, spec_extra={"nodeSelector": {labels.LABEL_NODEPOOL: pool}})


async def _claim_of(emulated: cluster.EmulatedCluster, pool: str) -> dict[str, Any] | None:
    for claim in await support.claims(emulated):
        if claim["metadata"]["labels"].get(labels.LABEL_NODEPOOL) == pool and claim["status"].get("nodeName"):
            return claim
    return None


@pytest.mark.slow
async def test_bad_objects_and_poison_messages_affect_only_themselves() -> None:
    options = support.cluster_options(crd_admission=False)
    async with (
        cluster.EmulatedCluster(options) as emulated,
        controlplane.ControlPlane(emulated, support.FAST) as controller,
    ):
        api = emulated.client
        spot = support.pool(
            "spot", requirements=[{"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
        )
        spot["spec"]["template"]["spec"]["requirements"] = [
            r for r in spot["spec"]["template"]["spec"]["requirements"] if r["values"] != ["on-demand"]
        ]
        broken = support.pool("broken")
        broken["spec"]["template"]["spec"]["requirements"] = [{"key": "kubernetes.io/arch", "operator": "Sideways"}]
        await support.apply_defaults(emulated, support.pool(), spot, broken)
        await api.create(resources.PODS, builders.pod("unreadable", requests={"cpu": [1]}))
        await api.create(resources.PODS, builders.pod("giant", requests={"memory": "1e999999999"}))
        await api.create(workloads.DEPLOYMENTS, _pinned("web", "default"))
        await api.create(workloads.DEPLOYMENTS, _pinned("batch", "spot"))
        await support.eventually(
            lambda: support.all_bound(emulated, "web", 1), clock=emulated.clock, within=90, what="web bound"
        )
        await support.eventually(
            lambda: support.all_bound(emulated, "batch", 1), clock=emulated.clock, within=90, what="batch bound"
        )

        # The web node's NodeClaim becomes one karpy cannot read; a pod it cannot read lands on that node.
        web: Any = await _claim_of(emulated, "default")
        web_instance = web["status"]["providerID"].rsplit("/", 1)[-1]
        spoiled = [*web["spec"]["requirements"], {"key": labels.LABEL_ZONE, "operator": "Sideways"}]
        await api.patch(resources.NODECLAIMS, web["metadata"]["name"], {"spec": {"requirements": spoiled}})
        spoiled_at = emulated.clock.now()
        strange = builders.pod("strange", cpu="10m", node=web["status"]["nodeName"], tolerations=[5])
        await api.create(resources.PODS, strange)

        # Poison beside a spot warning for the batch node.
        batch: Any = await _claim_of(emulated, "spot")
        batch_instance = batch["status"]["providerID"].rsplit("/", 1)[-1]
        sqs = boto3.client("sqs", region_name=emulated.region)
        for body in POISON:
            await asyncio.to_thread(sqs.send_message, QueueUrl=emulated.queue_url, MessageBody=body)
        await asyncio.to_thread(
            seeding.put_event,
            region=emulated.region,
            source="aws.ec2",
            detail_type="EC2 Spot Instance Interruption Warning",
            detail={"instance-id": batch_instance, "instance-action": "terminate"},
        )

        async def batch_moved() -> bool:
            names = {c["metadata"]["name"] for c in await support.claims(emulated)}
            running = await support.running_instances(emulated)
            bound = await support.all_bound(emulated, "batch", 1)
            return batch["metadata"]["name"] not in names and batch_instance not in running and bool(bound)

        await support.eventually(
            batch_moved, clock=emulated.clock, within=120, what="the interrupted batch node drained and replaced"
        )

        async def queue_empty() -> bool:
            attrs = (
                await asyncio.to_thread(
                    sqs.get_queue_attributes,
                    QueueUrl=emulated.queue_url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )
            )["Attributes"]
            return set(attrs.values()) == {"0"}

        await support.eventually(queue_empty, clock=emulated.clock, within=60, what="every message acted on or dropped")

        # Past garbage collection's grace (and a few of its passes), the unreadable claim's instance still runs.
        wait = garbagecollection.INSTANCE_GRACE + 15 - (emulated.clock.now() - spoiled_at)
        if wait > 0:
            await emulated.clock.sleep(wait)
        assert web_instance in await support.running_instances(emulated)
        assert await support.all_bound(emulated, "web", 1)
        stored = await api.get(resources.NODECLAIMS, web["metadata"]["name"])
        assert stored is not None
        assert not stored["metadata"].get("deletionTimestamp")

        rejected = controller.ctrl.rejections
        assert "broken" in rejected.rejected("NodePool")
        assert web["metadata"]["name"] in rejected.rejected("NodeClaim")
        assert {"default/unreadable", "default/strange"} <= set(rejected.rejected("Pod"))
        assert controller.task is not None
        assert not controller.task.done(), "the controller kept serving"
        giant = await api.get(resources.PODS, "giant", namespace="default")
        assert giant is not None
        assert not giant["spec"].get("nodeName")
