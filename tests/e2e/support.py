"""Builders and bounded waits shared by the end-to-end tests.

Every test runs on the cluster's autojump clock (`cluster_options`), and every wait here (`eventually`, `Sampler`,
`hold`) counts seconds of that clock: a bound is "within N seconds of the controller's and the stand-ins' timers",
which the load of the machine cannot stretch (the clock stands still while any request or executor call is in
flight, and jumps ahead only when everything waits)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Self, TypeVar

import boto3

from karpy import clock as karpy_clock
from karpy.api import labels
from karpy.cloudprovider import catalog
from karpy.kube import client, resources
from karpy_emulator import cluster, controlplane, demo, workloads
from karpy_emulator.apiserver import disruption as apiserver_disruption
from karpy_emulator.aws import seeding

T = TypeVar("T")
CLUSTER = "karpy-e2e"
FAST = controlplane.Options(batch_idle=0.5, batch_max=2.0, disruption_poll=1.0, validation_delay=2.0)
"""Short batch windows and disruption timings (upstream: 1 s/10 s batches, 10 s polls, 15 s validation)."""


POLL = 1.0
"""Seconds of the cluster's clock between two checks of `eventually`. Every sleeper is a deadline time jumps to, so a
shorter poll than the stand-ins' tick would cost real time for nothing."""


def cluster_options(**overrides: Any) -> cluster.ClusterOptions:
    """The e2e cluster: fast stand-ins on the autojump clock. The clock starts at the wall clock's now only so that
    the API server's timestamps and moto's (instance launch times, which moto takes from the wall clock) agree."""
    settings: dict[str, Any] = {
        "cluster_name": CLUSTER,
        "boot_delay": 1.0,
        "interval": 0.5,
        "autojump": True,
        "start_time": time.time(),
    }
    return cluster.ClusterOptions(**(settings | overrides))


@dataclasses.dataclass(frozen=True, slots=True)
class Unmet:
    """A check's false answer that says what is still false: `eventually` names it when it times out, where a bare
    False or None would leave the failure to be guessed."""

    why: str

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return self.why


async def eventually(
    check: Callable[[], Awaitable[T | Unmet | None]],
    *,
    clock: karpy_clock.Clock,
    within: float,
    what: str,
    every: float = POLL,
) -> T:
    """Check every `every` seconds of `clock` until `check` returns something truthy; fail naming `what` once `within`
    seconds of `clock` have passed, with the check's last answer (return an `Unmet` to say which part was false)."""
    deadline = clock.now() + within
    while True:
        last = await check()
        if last:
            return last
        if clock.now() >= deadline:
            raise AssertionError(f"timed out after {within:.0f} clock seconds waiting for {what} (last: {last!r})")
        await clock.sleep(every)


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
    body = demo.inflate_manifest(replicas, name=name, requests={"cpu": cpu})
    body["spec"]["template"]["spec"].update(spec_extra or {})
    return body


async def scale(emulated: cluster.EmulatedCluster, name: str, replicas: int) -> None:
    await emulated.client.patch(workloads.DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace="default")


async def pods_of(emulated: cluster.EmulatedCluster, app: str) -> list[dict[str, Any]]:
    pods, _ = await emulated.client.list(resources.PODS, namespace="default", label_selector=f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def all_bound(emulated: cluster.EmulatedCluster, app: str, replicas: int) -> list[dict[str, Any]] | Unmet:
    """The app's `replicas` pods once all are bound; else which are not, and what the scheduler said of each."""
    pods = await pods_of(emulated, app)
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    if len(pods) == replicas and not pending:
        return pods
    return Unmet(f"{len(pods)} of {replicas} {app} pods, not bound: {[_why_pending(p) for p in pending]}")


def _why_pending(pod: Mapping[str, Any]) -> str:
    scheduled = condition(pod, "PodScheduled")
    said = f" {scheduled.get('reason')}: {scheduled.get('message')}" if scheduled is not None else " (not tried yet)"
    return f"{pod['metadata']['name']}{said}"


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


def every_instance(emulated: cluster.EmulatedCluster) -> list[dict[str, Any]]:
    """Every instance of the cluster moto ever launched, whatever its state (blocking: call it from a thread)."""
    ec2 = boto3.client("ec2", region_name=emulated.region)
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{emulated.cluster_name}", "Values": ["owned"]}]
    )
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def node_zone(node_by_name: Mapping[str, Mapping[str, Any]], pod: Mapping[str, Any]) -> str:
    return str(node_by_name[pod["spec"]["nodeName"]]["metadata"]["labels"][labels.LABEL_ZONE])


async def zones(emulated: cluster.EmulatedCluster) -> list[str]:
    def describe() -> list[str]:
        ec2 = boto3.client("ec2", region_name=emulated.region)
        assert emulated.seeded is not None
        subnets = ec2.describe_subnets(SubnetIds=list(emulated.seeded.subnet_ids))["Subnets"]
        return sorted(s["AvailabilityZone"] for s in subnets)

    return await asyncio.to_thread(describe)


# -- disruption: AMIs, conditions, and watching the cluster while it runs ------------------------------------------


async def register_image(emulated: cluster.EmulatedCluster, name: str) -> str:
    """A new amd64 image in moto (what a newer EKS-optimized release would be); its id."""

    def register() -> str:
        ec2 = boto3.client("ec2", region_name=emulated.region)
        image = ec2.register_image(
            Name=name, Architecture="x86_64", RootDeviceName="/dev/xvda", VirtualizationType="hvm"
        )
        return str(image["ImageId"])

    return await asyncio.to_thread(register)


async def instance_images(emulated: cluster.EmulatedCluster) -> dict[str, str]:
    """Running cluster instance id -> the image it was launched from."""

    def describe() -> dict[str, str]:
        ec2 = boto3.client("ec2", region_name=emulated.region)
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{emulated.cluster_name}", "Values": ["owned"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return {i["InstanceId"]: i["ImageId"] for page in pages for r in page["Reservations"] for i in r["Instances"]}

    return await asyncio.to_thread(describe)


def condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == type_), None)


def is_true(obj: Mapping[str, Any], type_: str) -> bool:
    found = condition(obj, type_)
    return found is not None and found.get("status") == "True"


async def spot_interruption_warning(emulated: cluster.EmulatedCluster, instance: str) -> None:
    """EC2's two-minute warning for `instance`, through EventBridge to the interruption queue."""
    await asyncio.to_thread(
        seeding.put_event,
        region=emulated.region,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
        detail={"instance-id": instance, "instance-action": "terminate"},
    )


def instance_id(claim: Mapping[str, Any]) -> str:
    return str((claim.get("status") or {}).get("providerID") or "").rsplit("/", 1)[-1]


def disrupting(claims: Sequence[Mapping[str, Any]], node_list: Sequence[Mapping[str, Any]]) -> list[str]:
    """NodeClaims the disruption budget counts as being disrupted: deleting, or their Node tainted
    `karpenter.sh/disrupted`, and their instance not yet terminating (upstream stops counting a node once its
    instance is terminating: `BuildDisruptionBudgetMapping`)."""
    tainted = {
        str((n.get("spec") or {}).get("providerID") or "")
        for n in node_list
        if any(t.get("key") == labels.TAINT_DISRUPTED_KEY for t in (n.get("spec") or {}).get("taints") or ())
    }
    return sorted(
        c["metadata"]["name"]
        for c in claims
        if (c["metadata"].get("deletionTimestamp") or (c.get("status") or {}).get("providerID") in tainted)
        and not is_true(c, "InstanceTerminating")
    )


class Sampler:
    """`async with Sampler(probe, clock=c, every=0.2) as s:` calls `probe` every `every` seconds of `clock` while the
    block runs and keeps what it returned in `s.samples` (the cluster seen through time, for "at no moment"
    assertions)."""

    def __init__(self, probe: Callable[[], Awaitable[T]], *, clock: karpy_clock.Clock, every: float = 0.2) -> None:
        self._probe = probe
        self._clock = clock
        self._every = every
        self._task: asyncio.Task[None] | None = None
        self.samples: list[Any] = []

    async def _run(self) -> None:
        while True:
            self.samples.append(await self._probe())
            await self._clock.sleep(self._every)

    async def __aenter__(self) -> Sampler:
        self._task = asyncio.create_task(self._run(), name="e2e sampler")
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task  # a failed probe raises here


def instance_type_of(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["labels"][labels.LABEL_INSTANCE_TYPE])


def on_demand_price(emulated: cluster.EmulatedCluster, instance_type: str) -> float:
    """The list price the AWS provider ranks the type by (the bundled catalog's, as the emulated provider's)."""
    found = next(t for t in catalog.load(emulated.region) if t.name == instance_type)
    return min(o.price for o in found.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND)


async def hold(emulated: cluster.EmulatedCluster, seconds: float) -> list[tuple[frozenset[str], tuple[str, ...]]]:
    """Watch the cluster for `seconds` of its clock: (NodeClaim names, disrupting NodeClaims) every 0.2 s."""

    async def probe() -> tuple[frozenset[str], tuple[str, ...]]:
        found, node_list = await claims(emulated), await nodes(emulated)
        return frozenset(c["metadata"]["name"] for c in found), tuple(disrupting(found, node_list))

    async with Sampler(probe, clock=emulated.clock) as sampler:
        await emulated.clock.sleep(seconds)
    return list(sampler.samples)


async def select_image(emulated: cluster.EmulatedCluster, image_id: str) -> None:
    """Point the default EC2NodeClass at one image (selector terms are not hashed: only AMI drift follows)."""
    body = {"spec": {"amiFamily": "AL2023", "amiSelectorTerms": [{"id": image_id}]}}
    await emulated.client.patch(resources.EC2NODECLASSES, "default", body)


class Following:
    """A watch kept open for the length of an `async with` block: `listed` sees the objects there at the start,
    `seen` every event after that (a base for "at every state the API server went through" assertions)."""

    def __init__(self, emulated: cluster.EmulatedCluster, res: resources.Resource, *, namespace: str = "") -> None:
        self._emulated = emulated
        self._res = res
        self._namespace = namespace
        self._task: asyncio.Task[None] | None = None

    def listed(self, items: Sequence[Mapping[str, Any]]) -> None:
        raise NotImplementedError

    def seen(self, event: client.WatchEvent) -> None:
        raise NotImplementedError

    async def _follow(self, since: str) -> None:
        api = self._emulated.client
        while True:
            async for event in api.watch(self._res, resource_version=since, namespace=self._namespace):
                since = str(event.object["metadata"].get("resourceVersion") or since)
                self.seen(event)

    async def __aenter__(self) -> Self:
        items, since = await self._emulated.client.list(self._res, namespace=self._namespace)
        self.listed(items)
        self._task = asyncio.create_task(self._follow(since), name=f"e2e {self._res.plural} watch")
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task  # a failed watch raises here


class HealthyPods(Following):
    """`async with HealthyPods(emulated, "app") as h:` follows every change of the app's pods through a watch and
    records, after each one, how many are healthy as the disruption controller counts them (Ready, not deleting):
    `h.series` is the count at every state the API server went through, not a sample of it."""

    def __init__(self, emulated: cluster.EmulatedCluster, app: str) -> None:
        super().__init__(emulated, resources.PODS, namespace="default")
        self._app = app
        self._healthy: dict[str, bool] = {}
        self.series: list[int] = []

    def _observe(self, pod: Mapping[str, Any], *, deleted: bool = False) -> bool:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get("app") != self._app:
            return False
        name = str(meta.get("name"))
        if deleted:
            self._healthy.pop(name, None)
        else:
            self._healthy[name] = apiserver_disruption.is_healthy(pod)
        return True

    def listed(self, items: Sequence[Mapping[str, Any]]) -> None:
        for pod in items:
            self._observe(pod)
        self.series.append(sum(self._healthy.values()))

    def seen(self, event: client.WatchEvent) -> None:
        if self._observe(event.object, deleted=event.type == client.DELETED):
            self.series.append(sum(self._healthy.values()))


class NamesSeen(Following):
    """`async with NamesSeen(emulated, resources.NODECLAIMS) as seen:` keeps the name of every object of a resource
    that existed at any moment in `seen.names`, even one created and removed between two polls (a duplicate
    NodeClaim that emptiness would quietly remove)."""

    def __init__(self, emulated: cluster.EmulatedCluster, res: resources.Resource) -> None:
        super().__init__(emulated, res)
        self.names: set[str] = set()

    def listed(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.names.update(str(o["metadata"]["name"]) for o in items)

    def seen(self, event: client.WatchEvent) -> None:
        self.names.add(str(event.object["metadata"]["name"]))
