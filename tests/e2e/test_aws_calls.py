"""AWS calls at scale, end to end on virtual time: a scale-up of many nodes is one CreateFleet and one launch
template, and their scale-down merges the describes and terminations (the controller's clients count every call).

On the autojump clock time only moves once no request or AWS call is in flight, so every NodeClaim of a
provisioning pass has reached the CreateFleet batcher before its 35 ms window closes: what merges is decided by
the controller's concurrency, not by the machine's speed."""

from __future__ import annotations

import asyncio

import boto3
import pytest
from tests.e2e import support

from karpy.api import labels
from karpy_emulator import cluster, controlplane, workloads

NODES = 20
ONE_POD_A_NODE = {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}  # 2 vCPU: 1 × 1.5
UPSTREAM = controlplane.Options(interruption=False)
"""Upstream's timings; the SQS long poll is off (a blocking wait would hold virtual time still)."""


def ec2_calls(plane: controlplane.ControlPlane) -> dict[str, int]:
    return {op: n for (service, op), n in plane.aws_calls.calls().items() if service == "ec2"}


@pytest.mark.slow
@pytest.mark.cluster(boot_delay=2.0, interval=1.0)
async def test_twenty_nodes_up_and_down_in_a_handful_of_ec2_calls(emulated: cluster.EmulatedCluster) -> None:
    async with controlplane.ControlPlane(emulated, UPSTREAM) as plane:
        pool = support.pool(
            requirements=[ONE_POD_A_NODE], consolidate_after="30s", policy="WhenEmpty", budgets=[{"nodes": "100%"}]
        )
        await support.apply_defaults(emulated, pool)
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("wide", NODES, cpu="1.5"))
        await support.eventually(
            lambda: support.all_bound(emulated, "wide", NODES), clock=emulated.clock, within=120, what="pods bound"
        )
        up = ec2_calls(plane)
        assert len(await support.claims(emulated)) == NODES
        # One provisioning pass, one shape: one CreateFleet for all twenty (1,000 reconciles at once, as upstream;
        # with 16 at a time it took two), and one launch template made once.
        fleets = plane.aws_calls.batches()["create_fleet"].sizes
        assert (fleets.count, fleets.total) == (1, NODES)  # the node class's authorization dry runs are not batched
        ec2 = boto3.client("ec2", region_name=emulated.region)
        made = await asyncio.to_thread(ec2.describe_launch_templates)
        assert len(made["LaunchTemplates"]) == 1  # CreateLaunchTemplate calls also count the dry runs

        await support.scale(emulated, "wide", 0)
        await support.eventually(
            lambda: support.nothing_left(emulated), clock=emulated.clock, within=120, what="every node removed"
        )
        down = {op: n - up.get(op, 0) for op, n in ec2_calls(plane).items()}
    # Twenty terminations at once are one call. The describes before them and the finalizers' polls merge too,
    # and drift checks read the instance cache: with garbage collection's listing every 10 s, about ten describes
    # for the whole minute (unbatched: two or more per node; batched without the cache: 37).
    assert down["TerminateInstances"] == 1
    assert down["DescribeInstances"] <= 12, down
