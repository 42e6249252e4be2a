"""A cluster as upstream Karpenter v1.14 leaves it, written into an `EmulatedCluster` before karpy starts.

Instances in moto carry the tags upstream launches and tags them with (aws pkg/utils/utils.go GetTags, the nodeclaim
tagging controller: the cluster, nodepool, nodeclass and EKS cluster-name tags, then Name and the nodeclaim); their
Nodes are registered by the kubelet stand-in from AL2023 user data and then stamped as upstream's registration does
(core nodeclaim/lifecycle/registration.go: the unregistered taint off, registered and initialized labels, the
termination finalizer). EC2NodeClasses, NodePools and NodeClaims carry upstream's hash annotations under its versions
(nodepool "v3", ec2nodeclass "v6", hashstructure values karpy cannot reproduce), its finalizers, owner references
and conditions, the NodeClaims' written the way upstream writes them (a condition without a message among them).
Status goes through the status subresource, as controllers write it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import string
from collections.abc import Mapping, Sequence
from typing import Any

import boto3
from tests.e2e import support

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import userdata
from karpy.kube import resources
from karpy_emulator import cluster, workloads

INSTANCE_TYPE = "m5.large"
UPSTREAM_NODEPOOL_HASH_VERSION = "v3"
UPSTREAM_EC2NODECLASS_HASH_VERSION = "v6"
STAMP = "2026-08-01T10:00:00Z"
M5_LARGE_LABELS = {
    labels.LABEL_INSTANCE_TYPE: INSTANCE_TYPE,
    labels.LABEL_ARCH: "amd64",
    labels.LABEL_OS: "linux",
    labels.LABEL_CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND,
    "karpenter.k8s.aws/instance-category": "m",
    "karpenter.k8s.aws/instance-family": "m5",
    "karpenter.k8s.aws/instance-generation": "5",
    "karpenter.k8s.aws/instance-size": "large",
    "karpenter.k8s.aws/instance-cpu": "2",
    "karpenter.k8s.aws/instance-memory": "8192",
    "karpenter.k8s.aws/instance-hypervisor": "nitro",
}
CAPACITY = {"cpu": "2", "memory": "7910Mi", "pods": "29", "ephemeral-storage": "20Gi"}
ALLOCATABLE = {"cpu": "1930m", "memory": "7220Mi", "pods": "29", "ephemeral-storage": "17Gi"}
POD_CPU = "1500m"
"""One pod per m5.large: no node can be emptied or replaced by a cheaper one, so upstream left it at rest."""


@dataclasses.dataclass(frozen=True, slots=True)
class PoolSpec:
    """One NodePool upstream ran, its EC2NodeClass and how many nodes it had."""

    name: str
    nodeclass: str
    nodes: int
    taints: Sequence[Mapping[str, str]] = ()
    template_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    kubelet: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Fleet:
    """What was written: NodeClaim name -> (instance id, node name), per pool."""

    claims: Mapping[str, tuple[str, str]]
    pools: Mapping[str, Sequence[str]]

    @property
    def instances(self) -> set[str]:
        return {instance for instance, _ in self.claims.values()}


def _condition(type_: str, *, message: bool = True) -> dict[str, str]:
    out = {"type": type_, "status": "True", "reason": type_, "lastTransitionTime": STAMP}
    if message:
        out["message"] = ""
    return out


def nodeclass_manifest(emulated: cluster.EmulatedCluster, spec: PoolSpec) -> dict[str, Any]:
    discovery = [{"tags": {"karpenter.sh/discovery": emulated.cluster_name}}]
    body: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {
            "name": spec.nodeclass,
            "annotations": {
                labels.ANNOTATION_EC2NODECLASS_HASH: str(random.Random(spec.nodeclass).getrandbits(63)),
                labels.ANNOTATION_EC2NODECLASS_HASH_VERSION: UPSTREAM_EC2NODECLASS_HASH_VERSION,
            },
            "finalizers": [labels.FINALIZER_AWS_TERMINATION],
        },
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": emulated.node_role,
            "subnetSelectorTerms": discovery,
            "securityGroupSelectorTerms": discovery,
        },
    }
    if spec.kubelet is not None:
        body["spec"]["kubelet"] = dict(spec.kubelet)
    return body


def nodepool_manifest(spec: PoolSpec) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": spec.nodeclass},
            "requirements": [
                {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]},
                {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                {"key": labels.LABEL_ARCH, "operator": "In", "values": ["amd64"]},
                {"key": labels.LABEL_OS, "operator": "In", "values": ["linux"]},
            ],
            "expireAfter": "720h",
        }
    }
    if spec.taints:
        template["spec"]["taints"] = [dict(t) for t in spec.taints]
    if spec.template_labels:
        template["metadata"] = {"labels": dict(spec.template_labels)}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": spec.name,
            "annotations": {
                labels.ANNOTATION_NODEPOOL_HASH: str(random.Random(spec.name).getrandbits(63)),
                labels.ANNOTATION_NODEPOOL_HASH_VERSION: UPSTREAM_NODEPOOL_HASH_VERSION,
            },
        },
        "spec": {
            "template": template,
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
            "limits": {"cpu": "100"},
        },
    }


def _instance_tags(emulated: cluster.EmulatedCluster, spec: PoolSpec, claim: str, node: str) -> list[dict[str, str]]:
    tags = {
        f"{labels.TAG_CLUSTER_PREFIX}{emulated.cluster_name}": "owned",
        labels.TAG_NODEPOOL: spec.name,
        labels.TAG_EKS_CLUSTER_NAME: emulated.cluster_name,
        labels.TAG_EC2NODECLASS: spec.nodeclass,
        labels.TAG_NODECLAIM: claim,
        labels.TAG_NAME: node,
    }
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _node_labels(spec: PoolSpec) -> dict[str, str]:
    return {
        **M5_LARGE_LABELS,
        **spec.template_labels,
        labels.LABEL_NODEPOOL: spec.name,
        labels.LABEL_EC2NODECLASS: spec.nodeclass,
    }


def _launch(emulated: cluster.EmulatedCluster, spec: PoolSpec, claims: Sequence[str]) -> list[dict[str, Any]]:
    """Run one instance per claim as upstream's CreateFleet left it; blocking (boto3)."""
    seeded = emulated.seeded
    assert seeded is not None
    ec2 = boto3.client("ec2", region_name=emulated.region)
    image = next(v for k, v in seeded.images.items() if "x86_64/standard" in k)
    options = userdata.BootstrapOptions(
        cluster_name=emulated.cluster_name,
        cluster_endpoint="https://emulated.eks.amazonaws.com",
        ca_bundle="Q0E=",
        cluster_cidr="172.20.0.0/16",
        labels=_node_labels(spec),
        taints=tuple(meta.Taint(t["key"], t["effect"], t.get("value", "")) for t in spec.taints),
    )
    launched = []
    for i, claim in enumerate(claims):
        subnet = seeded.subnet_ids[i % len(seeded.subnet_ids)]
        reservation = ec2.run_instances(
            ImageId=image,
            InstanceType=INSTANCE_TYPE,
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet,
            SecurityGroupIds=list(seeded.security_group_ids),
            UserData=userdata.render(ec2nodeclass.AMIFamily.AL2023, options),
        )
        instance = reservation["Instances"][0]
        node = str(instance["PrivateDnsName"])
        ec2.create_tags(Resources=[instance["InstanceId"]], Tags=_instance_tags(emulated, spec, claim, node))
        launched.append(instance)
    return launched


def nodeclaim_manifest(spec: PoolSpec, name: str, *, pool_uid: str, instance: Mapping[str, Any]) -> dict[str, Any]:
    zone = str(instance["Placement"]["AvailabilityZone"])
    requirements = [
        {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]},
        {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels.LABEL_ARCH, "operator": "In", "values": ["amd64"]},
        {"key": labels.LABEL_OS, "operator": "In", "values": ["linux"]},
        {"key": labels.LABEL_NODEPOOL, "operator": "In", "values": [spec.name]},
        {"key": labels.LABEL_EC2NODECLASS, "operator": "In", "values": [spec.nodeclass]},
        *({"key": k, "operator": "In", "values": [v]} for k, v in spec.template_labels.items()),
    ]
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                **_node_labels(spec),
                labels.LABEL_ZONE: zone,
                labels.LABEL_REGION: zone[:-1],
                labels.LABEL_REGISTERED: "true",
                labels.LABEL_INITIALIZED: "true",
            },
            "annotations": {
                labels.ANNOTATION_NODEPOOL_HASH: str(random.Random(spec.name).getrandbits(63)),
                labels.ANNOTATION_NODEPOOL_HASH_VERSION: UPSTREAM_NODEPOOL_HASH_VERSION,
                labels.ANNOTATION_EC2NODECLASS_HASH: str(random.Random(spec.nodeclass).getrandbits(63)),
                labels.ANNOTATION_EC2NODECLASS_HASH_VERSION: UPSTREAM_EC2NODECLASS_HASH_VERSION,
                "karpenter.k8s.aws/tagged": "true",
                "compatibility.karpenter.k8s.aws/cluster-name-tagged": "true",
            },
            "finalizers": [labels.FINALIZER_TERMINATION],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": spec.name,
                    "uid": pool_uid,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": spec.nodeclass},
            "requirements": requirements,
            "resources": {"requests": {"cpu": POD_CPU, "pods": "1"}},
            "expireAfter": "720h",
        },
    }
    if spec.taints:
        body["spec"]["taints"] = [dict(t) for t in spec.taints]
    return body


def nodeclaim_status(instance: Mapping[str, Any]) -> dict[str, Any]:
    zone = str(instance["Placement"]["AvailabilityZone"])
    return {
        "providerID": f"aws:///{zone}/{instance['InstanceId']}",
        "imageID": instance["ImageId"],
        "nodeName": instance["PrivateDnsName"],
        "capacity": dict(CAPACITY),
        "allocatable": dict(ALLOCATABLE),
        "lastPodEventTime": STAMP,
        "conditions": [
            *(_condition(t) for t in ("Launched", "Registered", "Initialized", "Ready")),
            # metav1-style: upstream writes some without a message.
            _condition("ConsistentStateFound", message=False),
        ],
    }


def _nodepool_status(spec: PoolSpec) -> dict[str, Any]:
    conditions = [_condition(t) for t in ("ValidationSucceeded", "NodeClassReady", "Ready")]
    return {"conditions": conditions, "nodes": spec.nodes, "resources": {"cpu": str(2 * spec.nodes)}}


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))


async def populate(emulated: cluster.EmulatedCluster, pools: Sequence[PoolSpec]) -> Fleet:
    """Write `pools` into the cluster as upstream leaves them, with one pod per node (pool by pool deployments
    named after the pool), and wait until every pod runs on its node."""
    api = emulated.client
    rng = random.Random(12)
    claims: dict[str, tuple[str, str]] = {}
    by_pool: dict[str, list[str]] = {}
    for spec in pools:
        if await api.get(resources.EC2NODECLASSES, spec.nodeclass) is None:
            await api.create(resources.EC2NODECLASSES, nodeclass_manifest(emulated, spec))
        pool = await api.create(resources.NODEPOOLS, nodepool_manifest(spec))
        await api.patch(resources.NODEPOOLS, spec.name, {"status": _nodepool_status(spec)}, subresource="status")
        names = [f"{spec.name}-{_suffix(rng)}" for _ in range(spec.nodes)]
        launched = await asyncio.to_thread(_launch, emulated, spec, names)
        for name, instance in zip(names, launched, strict=True):
            body = nodeclaim_manifest(spec, name, pool_uid=pool["metadata"]["uid"], instance=instance)
            await api.create(resources.NODECLAIMS, body)
            await api.patch(resources.NODECLAIMS, name, {"status": nodeclaim_status(instance)}, subresource="status")
            claims[name] = (str(instance["InstanceId"]), str(instance["PrivateDnsName"]))
        by_pool[spec.name] = names
    for spec in pools:
        for name in by_pool[spec.name]:
            await _register(emulated, spec, claims[name][1])
        pod_spec: dict[str, Any] = {"nodeSelector": {labels.LABEL_NODEPOOL: spec.name}}
        if spec.taints:
            pod_spec["tolerations"] = [{"key": t["key"], "operator": "Exists"} for t in spec.taints]
        await api.create(
            workloads.DEPLOYMENTS, support.deployment(spec.name, spec.nodes, cpu=POD_CPU, spec_extra=pod_spec)
        )
        await support.eventually(
            lambda spec=spec: support.all_bound(emulated, spec.name, spec.nodes),
            clock=emulated.clock,
            within=60,
            what=f"{spec.name} pods",
        )
    return Fleet(claims=claims, pools=by_pool)


async def _register(emulated: cluster.EmulatedCluster, spec: PoolSpec, node: str) -> None:
    """Stamp the Node the kubelet stand-in registered the way upstream's registration and initialization did."""
    api = emulated.client
    found = await support.eventually(
        lambda: api.get(resources.NODES, node), clock=emulated.clock, within=60, what=f"node {node}"
    )
    taints = [t for t in found["spec"].get("taints") or () if t["key"] != labels.TAINT_UNREGISTERED_KEY]
    patch = {
        "metadata": {
            "labels": {labels.LABEL_REGISTERED: "true", labels.LABEL_INITIALIZED: "true"},
            "finalizers": [labels.FINALIZER_TERMINATION],
        },
        "spec": {"taints": taints},
    }
    await api.patch(resources.NODES, node, patch)
