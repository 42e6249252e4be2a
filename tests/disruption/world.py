"""An in-memory cluster for disruption scenarios: objects live in `karpy.kube.fake.FakeKubeClient`, `sync()` feeds
them to a real `karpy.state.Cluster` (as the informers would), the fake cloud provider prices the instance types."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from tests import builders

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy.api import decoding, hashing, labels, parse, quantity
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import generator, provider
from karpy.disruption import candidates, consolidation, simulation
from karpy.disruption import controller as disruption_controller
from karpy.disruption import metrics as disruption_metrics
from karpy.kube import client, fake, resources
from karpy.scheduling import scheduler
from karpy.state import cluster as state_cluster
from karpy.state import facts, statenode

T0 = 1_700_000_000.0
ZONE = "test-zone-1"
SYNCED = (resources.NODEPOOLS, resources.NODECLAIMS, resources.NODES, resources.PODS, resources.PDBS)


def ts(epoch: float) -> str:
    return decoding.format_timestamp(epoch)


def instance_type(name: str, cpu: int, od: float, spot: float | None = None) -> types.InstanceType:
    offerings = [types.Offering(zone=ZONE, capacity_type=labels.CAPACITY_TYPE_ON_DEMAND, price=od)]
    if spot is not None:
        offerings.append(types.Offering(zone=ZONE, capacity_type=labels.CAPACITY_TYPE_SPOT, price=spot))
    return generator.new_instance_type(
        name,
        {labels.RESOURCE_CPU: cpu * 1000, labels.RESOURCE_MEMORY: 4 * cpu * quantity.GI, labels.RESOURCE_PODS: 110_000},
        offerings=offerings,
    )


CATALOG = (
    instance_type("c2", 2, 0.10, 0.04),
    instance_type("c4", 4, 0.20, 0.08),
    instance_type("c8", 8, 0.40, 0.16),
)
CATALOG_BY_NAME = {t.name: t for t in CATALOG}


def cond(type_: str, at: float = T0, reason: str = "") -> dict[str, str]:
    return {"type": type_, "status": "True", "reason": reason or type_, "message": "", "lastTransitionTime": ts(at)}


def pool_fields(
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    after: str = "0s",
    budgets: Sequence[Mapping[str, Any]] = ({"nodes": "100%"},),
    capacity_types: Sequence[str] = ("on-demand",),
    requirements: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """`builders.nodepool` arguments of a scenario's pool: consolidation `policy` after `after`, `budgets` (every
    node at once unless told), launching only `capacity_types`, and `requirements` besides."""
    return {
        "requirements": [builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", *capacity_types), *requirements],
        "disruption": {"consolidationPolicy": policy, "consolidateAfter": after, "budgets": list(budgets)},
    }


def candidate(
    name: str,
    *,
    pool: str = "default",
    policy: str = "WhenEmptyOrUnderutilized",
    price: float = 0.20,
    reschedule_cost: float = 2.0,
    itype: str = "c4",
    capacity_type: str = labels.CAPACITY_TYPE_ON_DEMAND,
) -> candidates.Candidate:
    """A consolidatable candidate built directly, for the pure method and policy tests (no cluster behind it)."""
    claim = parse.nodeclaim(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {labels.LABEL_NODEPOOL: pool}},
            "spec": {
                "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
            "status": {"conditions": [cond(c) for c in ("Launched", "Registered", "Initialized", "Consolidatable")]},
        }
    )
    node = statenode.StateNode(
        name=name,
        nodeclaim=claim,
        node=None,
        labels={},
        taints=(),
        allocatable={},
        capacity={},
        nodepool=pool,
        initialized=True,
        managed=True,
    )
    return candidates.Candidate(
        node=node,
        claim=claim,
        pool=builders.parsed_nodepool(pool, uid=f"uid-{pool}", **pool_fields(policy=policy)),
        instance_type=CATALOG_BY_NAME[itype],
        capacity_type=capacity_type,
        zone=ZONE,
        price=price,
        pod_infos=(),
        reschedulable_pods=(),
        disruption_cost=reschedule_cost - 1.0,
        reschedule_cost=reschedule_cost,
    )


class World:
    def __init__(self, catalog: Sequence[types.InstanceType] = CATALOG) -> None:
        self.clock = karpy_clock.ManualClock(T0 + 3600)
        self.kube = fake.FakeKubeClient(self.clock)
        self.cluster = state_cluster.Cluster(clock=self.clock)
        self.cloud = provider.FakeCloudProvider(list(catalog))
        self.recorder = events.MemoryRecorder(self.clock)
        self.rejections = rejections.MemorySink()
        self.catalog = {t.name: t for t in catalog}

    # --- objects ------------------------------------------------------------------------------------------------

    def pool(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        """Store a NodePool; `spec` as `pool_fields` takes it."""
        return self.kube.put(resources.NODEPOOLS, builders.nodepool(name, uid=f"uid-{name}", **pool_fields(**spec)))

    def node(
        self,
        name: str,
        *,
        pool: str = "default",
        itype: str = "c4",
        capacity_type: str = "on-demand",
        conditions: Sequence[str] = ("Consolidatable",),
        node_annotations: Mapping[str, str] | None = None,
        tgp: str | None = None,
        ready: bool = True,
        last_pod_event: float | None = None,
    ) -> None:
        it = self.catalog[itype]
        node_labels = {
            labels.LABEL_NODEPOOL: pool,
            labels.LABEL_INSTANCE_TYPE: itype,
            labels.LABEL_ZONE: ZONE,
            labels.LABEL_CAPACITY_TYPE: capacity_type,
            labels.LABEL_INITIALIZED: "true",
            labels.LABEL_HOSTNAME: name,
        }
        pool_obj = parse.nodepool(self.kube.obj(resources.NODEPOOLS, pool) or {})
        resources_ = {k: quantity.format_resource(k, v) for k, v in it.capacity.items()}
        alloc = {k: quantity.format_resource(k, v) for k, v in it.allocatable.items()}
        spec: dict[str, Any] = {
            "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]}],
        }
        if tgp is not None:
            spec["terminationGracePeriod"] = tgp
        provider_id = f"fake://{ZONE}/{name}"
        status_extra = {} if last_pod_event is None else {"lastPodEventTime": ts(last_pod_event)}
        self.kube.put(
            resources.NODECLAIMS,
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {
                    "name": name,
                    "creationTimestamp": ts(T0),
                    "labels": node_labels,
                    "annotations": {
                        labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(pool_obj),
                        labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
                    },
                    "finalizers": [labels.FINALIZER_TERMINATION],
                },
                "spec": spec,
                "status": {
                    "providerID": provider_id,
                    "nodeName": name,
                    "capacity": resources_,
                    "allocatable": alloc,
                    "conditions": [cond(c) for c in ("Launched", "Registered", "Initialized", *conditions)],
                    **status_extra,
                },
            },
        )
        self.kube.put(
            resources.NODES,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": node_labels, "annotations": dict(node_annotations or {})},
                "spec": {"providerID": provider_id},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                    "capacity": resources_,
                    "allocatable": alloc,
                },
            },
        )

    def pod(
        self,
        name: str,
        node: str,
        *,
        cpu: str = "1",
        annotations: Mapping[str, str] | None = None,
        pod_labels: Mapping[str, str] | None = None,
        priority: int | None = None,
        affinity: Mapping[str, Any] | None = None,
        started: float | None = None,
    ) -> None:
        """A running pod on `node`, owned by a ReplicaSet; `started` sets status.startTime."""
        status: dict[str, Any] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        if started is not None:
            status["startTime"] = ts(started)
        spec: dict[str, Any] = {
            "nodeName": node,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
        }
        if priority is not None:
            spec["priority"] = priority
        if affinity is not None:
            spec["affinity"] = dict(affinity)
        self.kube.put(
            resources.PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": dict(pod_labels or {}),
                    "annotations": dict(annotations or {}),
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}],
                },
                "spec": spec,
                "status": status,
            },
        )

    def uninitialize(self, name: str) -> None:
        """Make node `name` a launched, registered node whose initialization has not finished (no Initialized
        condition, no initialized label), as a node just coming up in a scale-out."""
        claim = self.kube.objects[("nodeclaims", "", name)]
        claim["status"]["conditions"] = [c for c in claim["status"]["conditions"] if c["type"] != "Initialized"]
        for obj in (claim, self.kube.objects[("nodes", "", name)]):
            obj["metadata"]["labels"].pop(labels.LABEL_INITIALIZED)

    def pending_pod(self, name: str, *, cpu: str = "1") -> None:
        """A pod the kube-scheduler found no room for (provisionable), owned by a ReplicaSet."""
        self.kube.put(
            resources.PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}],
                },
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]},
                "status": {
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                },
            },
        )

    def pdb(self, name: str, match: Mapping[str, str], *, allowed: int, **spec: Any) -> None:
        """A PDB over the pods labelled `match`, `allowed` disruptions in its status; `spec` adds spec fields."""
        self.kube.put(
            resources.PDBS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"matchLabels": dict(match)}, **spec},
                "status": {"disruptionsAllowed": allowed},
            },
        )

    # --- state --------------------------------------------------------------------------------------------------

    def sync(self) -> None:
        """Replay the store into the cluster model like a relist (ADDED/MODIFIED for present, DELETED for gone)."""
        for res in SYNCED:
            present = {facts.key(o): o for o in self.kube.all(res)}
            for old in self.cluster.objects(res):
                if facts.key(old) not in present:
                    self.cluster.apply(res, client.WatchEvent("DELETED", old))
            for obj in present.values():
                self.cluster.apply(res, client.WatchEvent("MODIFIED", obj))
            self.cluster.mark_listed(res)

    def controller(
        self,
        *,
        solver: simulation.Solver = scheduler.solve,
        metrics: disruption_metrics.Metrics | None = None,
        **settings: Any,
    ) -> disruption_controller.DisruptionController:
        deps = disruption_controller.Deps(
            client=self.kube,
            cluster=self.cluster,
            cloud=self.cloud,
            clock=self.clock,
            recorder=self.recorder,
            settings=disruption_controller.Settings(**settings),
            metrics=metrics or disruption_metrics.Metrics(),
            solver=solver,
            rejections=self.rejections,
        )
        return disruption_controller.DisruptionController(deps)

    async def reconcile(
        self, ctrl: disruption_controller.DisruptionController, *, sync: bool = True
    ) -> consolidation.Command | None:
        """One pass, stepping virtual time through the validation delay. `sync=False` applies no watch events first,
        for passes that must see only time passing."""
        if sync:
            self.sync()
        task = asyncio.create_task(ctrl.reconcile())
        await self.clock.run_for(16)
        for _ in ctrl.methods:  # a rejected command's pass goes on to the methods after it, each with its own wait
            if task.done():
                break
            await self.clock.run_for(16)
        return (await task).command

    def taints(self, node: str) -> list[str]:
        obj = self.kube.obj(resources.NODES, node) or {}
        return [t["key"] for t in (obj.get("spec") or {}).get("taints") or ()]

    def claim_conditions(self, name: str) -> list[str]:
        obj = self.kube.obj(resources.NODECLAIMS, name) or {}
        return [c["type"] for c in (obj.get("status") or {}).get("conditions") or ()]

    def deleting(self, name: str) -> bool:
        obj = self.kube.obj(resources.NODECLAIMS, name)
        return obj is None or bool(obj["metadata"].get("deletionTimestamp"))
