"""A synthetic EKS cluster as `kubectl get nodepools,ec2nodeclasses,nodeclaims,nodes,pods,pdbs -A -o json` dumps it,
for `karpy explain`'s tests and benchmark (never used by the controller).

Objects carry what the API server returns (a pod about 2.5 KB of JSON, a node about 3 KB), the labels karpenter
puts on its nodes, and NodeClaims in the state the controller leaves them (Launched, Registered, Initialized, and
Consolidatable once the pool's consolidateAfter has passed). Shapes of nodes come from the bundled catalog, so
allocatable and prices are those `karpy explain` reads back. Deterministic: the same `Shape` gives the same dump.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from karpy.api import decoding, hashing, labels, parse, quantity
from karpy.cloudprovider import catalog, types

LIST_VERSION = "v1"


@dataclass(frozen=True, slots=True)
class Shape:
    nodes: int = 3
    pods_per_node: int = 10
    instance_type: str = "m5.2xlarge"
    pod_cpu: str = "250m"
    pod_memory: str = "512Mi"
    pending: int = 0
    """Pending pods (each asks for `pending_cpu`)."""
    pending_cpu: str = "1"
    guarded_every: int = 0
    """Every n-th node's pods belong to an app whose PodDisruptionBudget allows no disruption (0: none)."""
    pinned_every: int = 0
    """Every n-th node runs a pod annotated karpenter.sh/do-not-disrupt (0: none)."""
    budget: str = "10%"
    consolidate_after: str = "30s"
    region: str = "us-east-1"
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b", "us-east-1c")
    now: float = 1_800_000_000.0
    """Objects are an hour old at this time."""


def _stamp(shape: Shape, ago: float = 3600.0) -> str:
    return decoding.format_timestamp(shape.now - ago)


def nodepool(shape: Shape) -> dict[str, Any]:
    return {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodePool",
        "metadata": {"name": "default", "uid": "00000000-0000-4000-8000-000000000001", "generation": 1},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                        {"key": labels.LABEL_ARCH, "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    ],
                    "expireAfter": "720h",
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": shape.consolidate_after,
                "budgets": [{"nodes": shape.budget}],
            },
        },
    }


def nodeclass(shape: Shape) -> dict[str, Any]:
    subnets = [
        {"id": f"subnet-{i:08x}", "zone": zone, "zoneID": f"use1-az{i + 1}"} for i, zone in enumerate(shape.zones)
    ]
    return {
        "apiVersion": f"{labels.AWS_GROUP}/{labels.VERSION}",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "00000000-0000-4000-8000-000000000002"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "cluster"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "cluster"}}],
        },
        "status": {"subnets": subnets},
    }


def _node_labels(shape: Shape, name: str, zone: str, it: types.InstanceType) -> dict[str, str]:
    return {
        **it.labels,
        labels.LABEL_NODEPOOL: "default",
        labels.LABEL_CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND,
        labels.LABEL_ZONE: zone,
        labels.LABEL_REGION: shape.region,
        labels.LABEL_HOSTNAME: name,
        labels.LABEL_REGISTERED: "true",
        labels.LABEL_INITIALIZED: "true",
    }


def _resources(amounts: dict[str, int]) -> dict[str, str]:
    return {k: quantity.format_resource(k, v) for k, v in sorted(amounts.items())}


def _condition(kind: str, shape: Shape) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": _stamp(shape)}


def _machine(shape: Shape, i: int, it: types.InstanceType, pool_hash: str) -> Iterator[dict[str, Any]]:
    """The NodeClaim and Node of the i-th machine."""
    zone = shape.zones[i % len(shape.zones)]
    name = f"ip-10-{i // 250 % 256}-{i % 250}-{i // 64000}.ec2.internal"
    provider_id = f"aws:///{zone}/i-{i:017x}"
    node_labels = _node_labels(shape, name, zone, it)
    capacity, allocatable = _resources(dict(it.capacity)), _resources(dict(it.allocatable))
    kinds = ["Launched", "Registered", "Initialized", "Ready", "Consolidatable"]
    yield {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodeClaim",
        "metadata": {
            "name": f"default-{i:06d}",
            "uid": f"{i:08x}-0000-4000-8000-00000000000c",
            "creationTimestamp": _stamp(shape),
            "labels": {k: v for k, v in node_labels.items() if k != labels.LABEL_HOSTNAME},
            "annotations": {
                labels.ANNOTATION_NODEPOOL_HASH: pool_hash,
                labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
            },
            "finalizers": [labels.FINALIZER_TERMINATION],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": "default",
                    "uid": "np",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": [it.name]},
                {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            ],
            "expireAfter": "720h",
        },
        "status": {
            "providerID": provider_id,
            "nodeName": name,
            "imageID": "ami-0123456789abcdef0",
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [_condition(k, shape) for k in kinds],
        },
    }
    yield {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{i:08x}-0000-4000-8000-00000000000d",
            "creationTimestamp": _stamp(shape),
            "labels": node_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "alpha.kubernetes.io/provided-node-ip": "10.0.0.1"},
            "finalizers": [labels.FINALIZER_TERMINATION],
        },
        "spec": {"providerID": provider_id},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "reason": f"Kubelet{kind}",
                    "lastHeartbeatTime": _stamp(shape, 10),
                    "lastTransitionTime": _stamp(shape),
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.112-122.189.amzn2023.x86_64",
                "kubeletVersion": "v1.31.0-eks-a737599",
                "osImage": "Amazon Linux 2023",
            },
        },
    }


def pod(
    shape: Shape, index: int, *, node: str = "", app: str = "", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    app = app or f"app-{index % 97}"
    status: dict[str, Any]
    if node:
        status = {
            "phase": "Running",
            "conditions": [
                {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": _stamp(shape)}
                for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{index // 250 % 250}.{index % 250}",
            "qosClass": "Burstable",
            "startTime": _stamp(shape),
        }
    else:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": _stamp(shape, 60),
                }
            ],
            "qosClass": "Burstable",
        }
    cpu = shape.pod_cpu if node else shape.pending_cpu
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-6d8f7c9b5-{index:06d}",
            "namespace": f"team-{index % 20}" if not app.startswith("guarded") else "guarded",
            "uid": f"{index:08x}-0000-4000-8000-0000000000f0",
            "creationTimestamp": _stamp(shape),
            "labels": {"app": app, "pod-template-hash": "6d8f7c9b5"},
            "annotations": dict(annotations or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-6d8f7c9b5",
                    "uid": f"rs-{app}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": f"public.ecr.aws/example/{app}:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": cpu, "memory": shape.pod_memory}},
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            **({"nodeName": node} if node else {}),
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
        },
        "status": status,
    }


def pdb(name: str, namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
    }


def objects(shape: Shape) -> Iterator[dict[str, Any]]:
    """Every object of the cluster: the NodePool and EC2NodeClass, then per machine its NodeClaim, Node and pods,
    then the pending pods and the PodDisruptionBudgets."""
    it = next(t for t in catalog.load(shape.region, shape.zones) if t.name == shape.instance_type)
    pool = nodepool(shape)
    yield pool
    yield nodeclass(shape)
    pool_hash = hashing.nodepool_hash(parse.nodepool(pool))
    index = 0
    guarded = False
    for i in range(shape.nodes):
        claim, node = _machine(shape, i, it, pool_hash)
        yield claim
        yield node
        name = node["metadata"]["name"]
        for j in range(shape.pods_per_node):
            app = "guarded" if shape.guarded_every and i % shape.guarded_every == 0 and j == 0 else ""
            guarded = guarded or bool(app)
            pinned = shape.pinned_every and i % shape.pinned_every == 1 and j == 0
            annotations = {labels.ANNOTATION_DO_NOT_DISRUPT: "true"} if pinned else None
            yield pod(shape, index, node=name, app=app, annotations=annotations)
            index += 1
    for _ in range(shape.pending):
        yield pod(shape, index, app="pending")
        index += 1
    if guarded:
        yield pdb("guarded", "guarded", "guarded")


def dump(shape: Shape) -> dict[str, Any]:
    """The cluster as one List document (`kubectl get ... -o json`)."""
    return {
        "apiVersion": LIST_VERSION,
        "kind": "List",
        "items": list(objects(shape)),
        "metadata": {"resourceVersion": ""},
    }
