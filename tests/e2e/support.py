"""Builders and bounded waits shared by the end-to-end tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import boto3

from karpy.api import labels
from karpy.kube import resources
from karpy.sim import cluster, controlplane, demo, workloads

T = TypeVar("T")
CLUSTER = "karpy-e2e"
FAST = controlplane.Options(batch_idle=0.5, batch_max=2.0, disruption_poll=1.0, validation_delay=2.0)
"""Short batch windows and disruption timings (upstream: 1 s/10 s batches, 10 s polls, 15 s validation)."""


async def eventually(check: Callable[[], Awaitable[T | None]], *, within: float, what: str) -> T:
    """Poll `check` every 0.3 s until it returns something truthy; fail naming `what` after `within` seconds."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out after {within:.0f}s waiting for {what} (last: {last!r})")


def pool(
    name: str = "default",
    *,
    requirements: Sequence[Mapping[str, Any]] = (),
    consolidate_after: str = "2s",
    policy: str = "WhenEmptyOrUnderutilized",
    budgets: Sequence[Mapping[str, Any]] | None = None,
    expire_after: str = "720h",
) -> dict[str, Any]:
    body = demo.nodepool_manifest(consolidate_after=consolidate_after)
    body["metadata"]["name"] = name
    spec = body["spec"]
    spec["template"]["spec"]["expireAfter"] = expire_after
    if requirements:
        spec["template"]["spec"]["requirements"] = [*spec["template"]["spec"]["requirements"], *requirements]
    spec["disruption"]["consolidationPolicy"] = policy
    if budgets is not None:
        spec["disruption"]["budgets"] = list(budgets)
    return body


async def apply_defaults(emulated: cluster.EmulatedCluster, *pools: dict[str, Any]) -> None:
    assert emulated.seeded is not None
    api = emulated.client
    await api.create(
        resources.EC2NODECLASSES,
        demo.nodeclass_manifest(role=emulated.seeded.node_role, discovery=emulated.cluster_name),
    )
    for body in pools or (pool(),):
        await api.create(resources.NODEPOOLS, body)


def deployment(
    name: str, replicas: int, *, cpu: str = "1", spec_extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    body = demo.inflate_manifest(replicas)
    body["metadata"]["name"] = name
    body["spec"]["selector"] = {"matchLabels": {"app": name}}
    template = body["spec"]["template"]
    template["metadata"]["labels"] = {"app": name}
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    template["spec"].update(spec_extra or {})
    return body


async def scale(emulated: cluster.EmulatedCluster, name: str, replicas: int) -> None:
    await emulated.client.patch(workloads.DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace="default")


async def pods_of(emulated: cluster.EmulatedCluster, app: str) -> list[dict[str, Any]]:
    pods, _ = await emulated.client.list(resources.PODS, namespace="default", label_selector=f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def all_bound(emulated: cluster.EmulatedCluster, app: str, replicas: int) -> list[dict[str, Any]] | None:
    pods = await pods_of(emulated, app)
    if len(pods) == replicas and all(p["spec"].get("nodeName") for p in pods):
        return pods
    return None


async def nodes(emulated: cluster.EmulatedCluster) -> list[dict[str, Any]]:
    items, _ = await emulated.client.list(resources.NODES)
    return items


async def claims(emulated: cluster.EmulatedCluster) -> list[dict[str, Any]]:
    items, _ = await emulated.client.list(resources.NODECLAIMS)
    return items


async def nothing_left(emulated: cluster.EmulatedCluster) -> bool:
    """No NodeClaim, no Node and no running cluster instance."""
    return not await claims(emulated) and not await nodes(emulated) and not await running_instances(emulated)


async def running_instances(emulated: cluster.EmulatedCluster) -> list[str]:
    def describe() -> list[str]:
        ec2 = boto3.client("ec2", region_name=emulated.region)
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{emulated.cluster_name}", "Values": ["owned"]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ]
        )
        return [i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]]

    return await asyncio.to_thread(describe)


def node_zone(node_by_name: Mapping[str, Mapping[str, Any]], pod: Mapping[str, Any]) -> str:
    return str(node_by_name[pod["spec"]["nodeName"]]["metadata"]["labels"][labels.LABEL_ZONE])


async def zones(emulated: cluster.EmulatedCluster) -> list[str]:
    def describe() -> list[str]:
        ec2 = boto3.client("ec2", region_name=emulated.region)
        assert emulated.seeded is not None
        subnets = ec2.describe_subnets(SubnetIds=list(emulated.seeded.subnet_ids))["Subnets"]
        return sorted(s["AvailabilityZone"] for s in subnets)

    return await asyncio.to_thread(describe)
