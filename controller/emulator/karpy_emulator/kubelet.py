"""A kubelet (plus cloud node lifecycle and pod GC) stand-in: Nodes follow the emulated EC2 instances.

For every running instance tagged for the cluster it registers a Node the way a real node joins: providerID
`aws:///<zone>/<id>`, named after the instance's private DNS name, with the kubelet's own labels (arch, os,
hostname, instance type, zone, region) plus the labels and taints of the launch, read back from the instance's
user data (`bootstrap.parse`; so `karpenter.sh/unregistered:NoExecute` is there until the controller removes it),
capacity and allocatable from the instance type. The Node is NotReady until `boot_delay` has passed since
registration, then Ready. When the instance is gone (shutting-down, terminated, unknown) the Node is deleted, as
the cloud node lifecycle controller does, and pods bound to vanished nodes are deleted, as pod GC does. Pods bound
to a Ready node become Running and Ready, so budgets and drains see healthy pods.

Only Nodes it registered (annotation `MANAGED_ANNOTATION`) are ever changed or deleted. Time comes from the
injected clock; every step is bounded (one write per object that needs one). Pods and Nodes are read through
informer caches (`informers`): a pass looks only at the bound pods that changed and at those of the nodes that
changed, as each node's kubelet is woken by its own pods' and Node's events.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from karpy import clock as karpy_clock
from karpy.api import labels, quantity
from karpy.cloudprovider import types
from karpy.kube import client, resources
from karpy_emulator import bootstrap, informers, loop, reads
from karpy_emulator.aws import seeding

log = logging.getLogger(__name__)

MANAGED_ANNOTATION = "sim.karpy.dev/kubelet"
"""On every Node this stand-in registered; the value is the instance id."""
REGISTERED_AT_ANNOTATION = "sim.karpy.dev/registered-at"
"""Clock seconds of registration; readiness is measured from it (so a restarted stand-in keeps the schedule)."""
PROVIDER_ID_PREFIX = "aws:///"
GONE_STATES = frozenset({"shutting-down", "terminated"})
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
READY_POD_CONDITIONS = ("Initialized", "ContainersReady", "Ready", "PodScheduled")
REGISTER_CONCURRENCY = 16
"""Nodes registering at once (each reads its user data from EC2 and creates its Node)."""
CONCURRENCY = 16
"""Status writes in flight at once (nodes turning Ready, pods starting): every node's kubelet writes its own."""


class InstanceSource(Protocol):
    """Where instances are read from (`seeding.InstanceReader`); blocking, called from a worker thread."""

    def cluster_instances(self, cluster_name: str) -> list[seeding.InstanceView]: ...

    def user_data(self, instance_id: str) -> str: ...


@runtime_checkable
class InstanceStates(Protocol):
    """A source that can say cheaply whether any instance appeared, went or changed state (`MotoInstances`): equal
    answers mean nothing did. A source without it is read on every tick."""

    def states(self) -> Hashable: ...


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    cluster_name: str
    region: str
    boot_delay: float = 5.0
    """Seconds from registration to Ready=True (container runtime, CNI and kubelet start-up)."""
    register_delay: float = 0.0
    """Seconds from first seeing the instance running to registering its Node (the OS boot)."""
    interval: float = 1.0
    """Seconds between reconciliations."""
    kubelet_version: str = "v1.31.0-eks-emulated"


@dataclass(slots=True)
class SyncReport:
    """What one reconciliation changed (for tests and logs)."""

    registered: list[str] = field(default_factory=list)
    became_ready: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    pods_started: list[str] = field(default_factory=list)
    pods_collected: list[str] = field(default_factory=list)


def timestamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provider_id(instance: seeding.InstanceView) -> str:
    return f"{PROVIDER_ID_PREFIX}{instance.zone}/{instance.id}"


def node_name(instance: seeding.InstanceView) -> str:
    """The private DNS name, as EKS nodes are named; derived from the private IP when the emulator has none."""
    if instance.private_dns_name:
        return instance.private_dns_name
    if instance.private_ip:
        return f"ip-{instance.private_ip.replace('.', '-')}.ec2.internal"
    return instance.id


def _amounts(values: Mapping[str, int]) -> dict[str, str]:
    return {name: quantity.format_resource(name, milli) for name, milli in sorted(values.items())}


def node_manifest(
    instance: seeding.InstanceView,
    boot: bootstrap.Bootstrap,
    instance_type: types.InstanceType,
    *,
    region: str,
    registered_at: float,
    kubelet_version: str,
) -> dict[str, Any]:
    """The Node a kubelet on `instance` registers: NotReady, launch labels/taints, capacity of its type."""
    name = node_name(instance)
    node_labels = dict(boot.labels)
    node_labels.update(
        {
            labels.LABEL_ARCH: instance_type.labels.get(labels.LABEL_ARCH, "amd64"),
            labels.LABEL_OS: instance_type.labels.get(labels.LABEL_OS, "linux"),
            labels.LABEL_HOSTNAME: name,
            labels.LABEL_INSTANCE_TYPE: instance.instance_type,
            labels.LABEL_ZONE: instance.zone,
            labels.LABEL_REGION: region,
        }
    )
    capacity = dict(instance_type.capacity)
    allocatable = dict(instance_type.allocatable)
    if boot.max_pods is not None:  # --max-pods / maxPods wins over the ENI-derived default, as on a real node
        capacity[labels.RESOURCE_PODS] = allocatable[labels.RESOURCE_PODS] = boot.max_pods * quantity.MILLI
    stamp = timestamp(registered_at)
    addresses = [{"type": "InternalIP", "address": instance.private_ip}] if instance.private_ip else []
    addresses += [{"type": "InternalDNS", "address": name}, {"type": "Hostname", "address": name}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": {MANAGED_ANNOTATION: instance.id, REGISTERED_AT_ANNOTATION: repr(registered_at)},
        },
        "spec": {
            "providerID": provider_id(instance),
            "taints": [
                {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})} for t in boot.taints
            ],
        },
        "status": {
            "capacity": _amounts(capacity),
            "allocatable": _amounts(allocatable),
            "conditions": [_ready_condition(False, stamp)],
            "addresses": addresses,
            "nodeInfo": {
                "architecture": node_labels[labels.LABEL_ARCH],
                "operatingSystem": node_labels[labels.LABEL_OS],
                "kubeletVersion": kubelet_version,
                "containerRuntimeVersion": "containerd://1.7.27",
                "osImage": "Amazon Linux 2023 (emulated)",
                "machineID": instance.id,
            },
        },
    }


def _ready_condition(ready: bool, stamp: str) -> dict[str, str]:
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "container runtime network not ready",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ready_status_patch(node: Mapping[str, Any], now: float) -> dict[str, Any]:
    """The status merge patch that turns the Node Ready (other conditions kept)."""
    conditions = [c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") != "Ready"]
    return {"status": {"conditions": [*conditions, _ready_condition(True, timestamp(now))]}}


def pod_running(pod: Mapping[str, Any]) -> bool:
    pod_status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod_status.get("conditions") or ())
    return pod_status.get("phase") == "Running" and ready


def running_status_patch(pod: Mapping[str, Any], node: Mapping[str, Any], now: float) -> dict[str, Any]:
    """The status merge patch of a pod whose containers started: Running, every readiness condition True."""
    old = pod.get("status") or {}
    stamp = timestamp(now)
    kept = [c for c in old.get("conditions") or () if c.get("type") not in READY_POD_CONDITIONS]
    scheduled = next((c for c in old.get("conditions") or () if c.get("type") == "PodScheduled"), None)
    conditions = [
        *kept,
        scheduled if scheduled is not None and scheduled.get("status") == "True" else _condition("PodScheduled", stamp),
        *(_condition(kind, stamp) for kind in ("Initialized", "ContainersReady", "Ready")),
    ]
    addresses = (node.get("status") or {}).get("addresses") or ()
    host_ip = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), "")
    containers = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": stamp}},
        }
        for c in (pod.get("spec") or {}).get("containers") or ()
    ]
    return {
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": host_ip,
            "startTime": old.get("startTime") or stamp,
            "containerStatuses": containers,
        }
    }


def _bound_to(pod: Mapping[str, Any] | None) -> str:
    """The node the pod is bound to ("" when none)."""
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


def node_of(pod: Mapping[str, Any]) -> list[str]:
    """The node the pod is bound to, if any (an `informers.Index` of pods by node)."""
    bound_to = _bound_to(pod)
    return [bound_to] if bound_to else []


def _condition(kind: str, stamp: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "lastTransitionTime": stamp}


class Kubelet:
    """`await kubelet.run()` reconciles every `settings.interval` until cancelled; `sync()` is one pass."""

    def __init__(
        self,
        kube: client.KubeClient,
        source: InstanceSource,
        *,
        settings: KubeletSettings,
        clock: karpy_clock.Clock,
        instance_types: Mapping[str, types.InstanceType],
        reader: reads.Reader | None = None,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._source = source
        self._settings = settings
        self._clock = clock
        self._types = instance_types
        self._first_seen: dict[str, float] = {}
        self._boots: dict[str, bootstrap.Bootstrap | None] = {}  # None: unreadable user data (never joins)
        self._waiting = False  # the last pass left a node booting or an instance waiting to register
        self._states: Hashable = None  # the instances' states the last pass read
        self._pods_seen = informers.Cache(resources.PODS)
        self._nodes_seen = informers.Cache(resources.NODES)
        self._on_node = informers.Index(node_of)  # node name -> the pods bound to it
        self._queued: set[informers.Key] = set()  # bound pods to look at (start or collect)

    async def run(self) -> None:
        watch = loop.watch(self._reads, (resources.PODS, resources.NODES, resources.NODECLAIMS), due=self._due)
        await loop.every(self._settings.interval, self.sync, clock=self._clock, name="kubelet", watch=watch)

    async def _due(self, now: float) -> bool:
        """Instances live outside the API server: a pass is due when one changed, or when the last pass left one
        booting or waiting to register (time alone moves those on)."""
        if self._waiting or not isinstance(self._source, InstanceStates):
            return True
        return await asyncio.to_thread(self._source.states) != self._states

    async def sync(self) -> SyncReport:
        report = SyncReport()
        # Pods and nodes in one cut: a pod bound to a node that the cut lacks is really orphaned.
        await self._refresh()
        if isinstance(self._source, InstanceStates):  # before the instances: a change meanwhile wakes the next tick
            self._states = await asyncio.to_thread(self._source.states)
        instances = await asyncio.to_thread(self._source.cluster_instances, self._settings.cluster_name)
        nodes = list(self._nodes_seen.sorted())
        live = {provider_id(i): i for i in instances if i.state not in GONE_STATES}
        by_provider = {str((n.get("spec") or {}).get("providerID") or ""): n for n in nodes}
        now = self._clock.now()
        self._forget(set(live))
        joining = [i for pid, i in live.items() if i.state == "running" and pid not in by_provider]
        registered = 0
        for start in range(0, len(joining), REGISTER_CONCURRENCY):  # kubelets boot side by side, not in turn
            batch = joining[start : start + REGISTER_CONCURRENCY]
            for instance, created in zip(
                batch, await asyncio.gather(*(self._register(i, now) for i in batch)), strict=True
            ):
                if created is not None:
                    nodes.append(created)
                    report.registered.append(node_name(instance))
                    registered += 1
        # Instances that will join once time passes (register delay, a name taken); not those that never will.
        unjoined = sum(1 for i in joining if self._boots.get(provider_id(i), True) is not None) - registered
        survivors = []
        booted: list[Mapping[str, Any]] = []
        for node in nodes:
            meta = node.get("metadata") or {}
            name = str(meta.get("name"))
            managed = MANAGED_ANNOTATION in (meta.get("annotations") or {})
            if managed and str((node.get("spec") or {}).get("providerID") or "") not in live:
                if not meta.get("deletionTimestamp"):
                    await self._kube.delete(resources.NODES, name)
                    report.removed.append(name)
                continue
            survivors.append(node)
            if managed and not is_ready(node):
                if self._boot_done(node, now):
                    booted.append(node)
                elif not meta.get("deletionTimestamp"):
                    unjoined += 1
        turned = await loop.gather_limited(
            [functools.partial(self._turn_ready, n, now) for n in booted], limit=CONCURRENCY
        )
        report.became_ready.extend(str(n["metadata"]["name"]) for n in booted)
        # The Ready nodes as the API server answered: the listed ones are the store's own, never changed here.
        ready_now = {str(n["metadata"]["name"]): n for n in turned}
        for name in ready_now:  # their pods may start now
            self._queued.update(self._on_node.get(name))
        survivors = [ready_now.get(str(n["metadata"]["name"]), n) for n in survivors]
        await self._pods({str(n["metadata"]["name"]): n for n in nodes}, survivors, now, report)
        self._waiting = unjoined > 0
        return report

    async def _refresh(self) -> None:
        """Bring the pod and node caches up to date; queue the bound pods that changed and those of the nodes that
        changed (a node turning Ready starts its pods, one going collects them), as each node's kubelet watches its
        own pods (`spec.nodeName=<node>`) and its own Node."""
        pod_deltas, node_deltas = await informers.refresh(self._reads, (self._pods_seen, self._nodes_seen))
        for delta in pod_deltas:
            self._on_node.update(delta)
            if _bound_to(delta.new):
                self._queued.add(delta.key)
        for delta in node_deltas:
            self._queued.update(self._on_node.get(delta.key[1]))

    async def _turn_ready(self, node: Mapping[str, Any], now: float) -> dict[str, Any]:
        patch = ready_status_patch(node, now)
        return await self._kube.patch(resources.NODES, str(node["metadata"]["name"]), patch, subresource="status")

    async def _pods(
        self,
        all_nodes: Mapping[str, Mapping[str, Any]],
        survivors: list[Mapping[str, Any]],
        now: float,
        report: SyncReport,
    ) -> None:
        """Start or collect the queued pods; the rest wait for a change of theirs or of their node."""
        ready_nodes = {
            str(n["metadata"]["name"]): n
            for n in survivors
            if MANAGED_ANNOTATION in (n["metadata"].get("annotations") or {}) and is_ready(n)
        }
        starting: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        for key in sorted(self._queued):
            pod = self._pods_seen.objects.get(key)
            meta = (pod or {}).get("metadata") or {}
            bound_to = _bound_to(pod)
            if pod is None or not bound_to or meta.get("deletionTimestamp"):
                self._queued.discard(key)
                continue
            if bound_to not in all_nodes:  # pod GC: the node object is gone (a deleting node still runs pods)
                if await self._kube.delete(resources.PODS, str(meta["name"]), namespace=str(meta["namespace"])):
                    report.pods_collected.append(f"{meta.get('namespace')}/{meta.get('name')}")
                self._queued.discard(key)
                continue
            node = ready_nodes.get(bound_to)
            phase = (pod.get("status") or {}).get("phase")
            if node is not None and phase not in TERMINAL_POD_PHASES and not pod_running(pod):
                starting.append((pod, node))
            else:
                self._queued.discard(key)
        # The pods of different nodes start side by side (a kubelet each), not one round trip after the other.
        started = await loop.gather_limited(
            [functools.partial(self._start, pod, node, now) for pod, node in starting], limit=CONCURRENCY
        )
        self._queued.difference_update(informers.key_of(pod) for pod, _ in starting)
        report.pods_started.extend(key for key in started if key is not None)

    async def _start(self, pod: Mapping[str, Any], node: Mapping[str, Any], now: float) -> str | None:
        """Mark the pod Running; its "namespace/name", or None when it is gone."""
        meta = pod.get("metadata") or {}
        patch = running_status_patch(pod, node, now)
        try:
            await self._kube.patch(
                resources.PODS, str(meta["name"]), patch, namespace=str(meta["namespace"]), subresource="status"
            )
        except client.NotFound:
            return None
        return f"{meta.get('namespace')}/{meta.get('name')}"

    def _boot_done(self, node: Mapping[str, Any], now: float) -> bool:
        raw = ((node.get("metadata") or {}).get("annotations") or {}).get(REGISTERED_AT_ANNOTATION)
        try:
            registered_at = float(raw) if raw is not None else now
        except ValueError:
            registered_at = now
        return now >= registered_at + self._settings.boot_delay

    def _forget(self, live: set[str]) -> None:
        for pid in [p for p in self._first_seen if p not in live]:
            del self._first_seen[pid]
            self._boots.pop(pid, None)

    async def _register(self, instance: seeding.InstanceView, now: float) -> dict[str, Any] | None:
        pid = provider_id(instance)
        first = self._first_seen.setdefault(pid, now)
        if now < first + self._settings.register_delay:
            return None
        instance_type = self._types.get(instance.instance_type)
        if instance_type is None:
            if pid not in self._boots:
                log.warning("kubelet stand-in: %s is of unknown type %s", instance.id, instance.instance_type)
                self._boots[pid] = None
            return None
        if pid not in self._boots:
            text = await asyncio.to_thread(self._source.user_data, instance.id)
            try:
                self._boots[pid] = bootstrap.parse(text)
            except bootstrap.BootstrapError as error:
                log.warning("kubelet stand-in: %s cannot bootstrap, never joins: %s", instance.id, error)
                self._boots[pid] = None
        boot = self._boots[pid]
        if boot is None:
            return None
        body = node_manifest(
            instance,
            boot,
            instance_type,
            region=self._settings.region,
            registered_at=now,
            kubelet_version=self._settings.kubelet_version,
        )
        try:
            return await self._kube.create(resources.NODES, body)
        except client.AlreadyExists:
            log.warning("kubelet stand-in: a node named %s already exists; %s waits", body["metadata"]["name"], pid)
            return None
