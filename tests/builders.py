"""Kubernetes object builders shared by every test folder (import as `from tests import builders`).

Each returns a fresh dict: callers may mutate it. Keyword parameters carry what tests vary; `namespace=None` leaves the
namespace out of the body, as a client posting to a namespaced URL does (the API server stamps it from the path).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import ec2nodeclass as api_ec2nodeclass
from karpy.api import nodeclaim as api_nodeclaim
from karpy.api import nodepool as api_nodepool
from karpy.api import parse
from karpy.provisioning import snapshot
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import scheduler
from karpy.state import statenode
from karpy.termination import drain

NS = "default"
DELETED_AT = "2026-01-01T00:00:00Z"
HOSTNAME_KEY = "kubernetes.io/hostname"
_NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _metadata(name: str, namespace: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    return metadata


def pod(
    name: str = "p",
    *,
    namespace: str | None = NS,
    labels: dict[str, str] | None = None,
    node: str = "",
    cpu: str | None = "1",
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    image: str = "pause",
    ports: Sequence[Mapping[str, Any]] = (),
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
    claims: Sequence[str] = (),
    owners: Sequence[Mapping[str, Any]] = (),
    created: str | float | None = None,
    deleted: str | None = None,
    phase: str | None = None,
    started: str | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A one-container pod requesting `cpu` and `memory` (None: no such request), bound to `node` if given.

    `requests` replaces the cpu/memory pair verbatim (even malformed values, for admission tests), `ports` are the
    container's; `claims` mounts those PersistentVolumeClaims as volumes `v0`, `v1`, ...; `owners` are its
    ownerReferences, `created` its creationTimestamp (the scheduler's parser orders pods by a number there),
    `deleted` its deletionTimestamp; `phase`, `started` (startTime) and `status` make up its status (none without
    them); other keyword arguments are spec fields.
    """
    if requests is None:
        requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    container: dict[str, Any] = {"name": "app", "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    if ports:
        container["ports"] = [dict(port) for port in ports]
    body: dict[str, Any] = {"containers": [container]}
    if node:
        body["nodeName"] = node
    if claims:
        body["volumes"] = [claim_volume(f"v{i}", claim) for i, claim in enumerate(claims)]
    body.update(copy.deepcopy(spec))
    metadata = _metadata(name, namespace, labels or {})
    if uid is not None:
        metadata["uid"] = uid
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if owners:
        metadata["ownerReferences"] = [dict(owner) for owner in owners]
    if created is not None:
        metadata["creationTimestamp"] = created
    if deleted is not None:
        metadata["deletionTimestamp"] = deleted
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}
    shortcuts = {"phase": phase, "startTime": started}
    pod_status = {
        **{key: value for key, value in shortcuts.items() if value is not None},
        **copy.deepcopy(status or {}),
    }
    if pod_status:
        out["status"] = pod_status
    return out


def parsed_pod(name: str = "p", **fields: Any) -> scheduling_pods.Pod:
    """`pod(name, **fields)` through the real parser, as the scheduler sees it."""
    return scheduling_pods.from_manifest(pod(name, **fields))


def parsed_drain_pod(name: str = "p", **fields: Any) -> drain.DrainPod:
    """`pod(name, **fields)` as the termination controller's drain sees it."""
    return drain.from_manifest(pod(name, **fields))


def deployment(
    name: str = "inflate", replicas: int = 1, *, namespace: str | None = NS, **pod_fields: Any
) -> dict[str, Any]:
    """A Deployment of `replicas` pods labelled `app: name`, each `pod(**pod_fields)`."""
    template = pod(name, namespace=None, labels={"app": name}, **pod_fields)
    del template["metadata"]["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name, namespace),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def claim_volume(volume_name: str, claim: str) -> dict[str, Any]:
    """A pod volume that mounts PersistentVolumeClaim `claim`."""
    return {"name": volume_name, "persistentVolumeClaim": {"claimName": claim}}


def deleting(obj: dict[str, Any], *, at: str = DELETED_AT) -> dict[str, Any]:
    """A copy marked for deletion at `at` (the API server's deletionTimestamp)."""
    out = copy.deepcopy(obj)
    out["metadata"]["deletionTimestamp"] = at
    return out


def condition(type_: str, status: str = "True", **fields: str) -> dict[str, str]:
    """A status condition; keyword arguments add fields such as `reason` or `lastTransitionTime`."""
    return {"type": type_, "status": status, **fields}


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy whose status says Running and Ready (what a PDB counts as healthy)."""
    out = copy.deepcopy(obj)
    out["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return out


def unschedulable(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy whose status says kube-scheduler found no node for it (what the provisioner acts on)."""
    out = copy.deepcopy(obj)
    out["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    return out


def node(
    name: str = "ip-10-0-0-1",
    *,
    provider_id: str = "",
    labels: dict[str, str] | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    allocatable: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    ready: bool | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    unschedulable: bool = False,
    hostname: bool = False,
    conditions: Sequence[Mapping[str, str]] = (),
    finalizers: Sequence[str] = (),
    owners: Sequence[Mapping[str, Any]] = (),
    resource_version: str | None = None,
) -> dict[str, Any]:
    """A Node with `cpu`/`memory`/`pods` allocatable (`allocatable` replaces all three; `capacity`, when given, is
    its status capacity); `ready` adds the Ready condition and `conditions` others, `taints` sets the spec taints,
    `hostname` the kubelet's hostname label; `finalizers`, `owners` (ownerReferences) and `resource_version` go to
    its metadata."""
    node_labels = {HOSTNAME_KEY: name} if hostname else {}
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**node_labels, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": dict(allocatable or {"cpu": cpu, "memory": memory, "pods": pods})},
    }
    if capacity is not None:
        obj["status"]["capacity"] = dict(capacity)
    if finalizers:
        obj["metadata"]["finalizers"] = list(finalizers)
    if owners:
        obj["metadata"]["ownerReferences"] = [dict(owner) for owner in owners]
    if resource_version is not None:
        obj["metadata"]["resourceVersion"] = resource_version
    if provider_id:
        obj["spec"]["providerID"] = provider_id
    if taints is not None:
        obj["spec"]["taints"] = [dict(taint) for taint in taints]
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    ready_condition = [] if ready is None else [condition("Ready", "True" if ready else "False")]
    if ready_condition or conditions:
        obj["status"]["conditions"] = [*ready_condition, *(dict(c) for c in conditions)]
    return obj


def parsed_state_node(
    name: str = "ip-10-0-0-1",
    *,
    bound: Sequence[scheduling_pods.Pod] = (),
    volume_limits: Mapping[str, int] | None = None,
    **fields: Any,
) -> statenode.StateNode:
    """`node(name, **fields)` with the `bound` pods and CSI `volume_limits`, as the cluster-state cache joins them
    (no NodeClaim)."""
    return statenode.build(claim=None, node=node(name, **fields), pods=tuple(bound), volume_limits=volume_limits)


def parsed_existing_node(name: str = "ip-10-0-0-1", **fields: Any) -> scheduler.ExistingNode:
    """`parsed_state_node(name, **fields)` as the provisioner hands it to the scheduler."""
    (existing,) = snapshot.existing_nodes([parsed_state_node(name, **fields)])
    return existing


def pdb(
    name: str,
    selector: dict[str, Any],
    *,
    namespace: str | None = NS,
    match_labels: bool = True,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A PodDisruptionBudget over the pods labelled `selector` (the whole label selector when `match_labels` is
    False); keyword arguments are spec fields, `status` its status."""
    obj: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(name, namespace),
        "spec": {"selector": {"matchLabels": selector} if match_labels else selector, **spec},
    }
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def nodepool(
    name: str = "default",
    *,
    requirements: Sequence[Mapping[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    template_annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    template_spec: Mapping[str, Any] | None = None,
    node_class: str = "default",
    uid: str | None = None,
    annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A minimal valid NodePool (amd64 unless `requirements` says otherwise, class `node_class`); `labels`,
    `template_annotations` and `taints` are its template's, `template_spec` other fields of the template's spec,
    `uid` and `annotations` the pool's own; other keyword arguments replace top-level spec fields."""
    claim_spec: dict[str, Any] = {
        "nodeClassRef": {**_NODE_CLASS_REF, "name": node_class},
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
    }
    if requirements is not None:
        claim_spec["requirements"] = copy.deepcopy(list(requirements))
    if taints is not None:
        claim_spec["taints"] = [dict(taint) for taint in taints]
    claim_spec.update(copy.deepcopy(dict(template_spec or {})))
    metadata: dict[str, Any] = {"name": name}
    if uid is not None:
        metadata["uid"] = uid
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    pool_template: dict[str, Any] = {"spec": claim_spec}
    template_metadata = {"labels": labels, "annotations": template_annotations}
    if any(value is not None for value in template_metadata.values()):
        pool_template["metadata"] = {key: dict(value) for key, value in template_metadata.items() if value is not None}
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": metadata,
        "spec": {"template": pool_template},
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest


def parsed_nodepool(name: str = "default", **fields: Any) -> api_nodepool.NodePool:
    """`nodepool(name, **fields)` through the real parser."""
    return parse.nodepool(nodepool(name, **fields))


def requirement(key: str, operator: str, *values: str, min_values: int | None = None) -> dict[str, Any]:
    """A node selector requirement as manifests spell it (no `values` for Exists and DoesNotExist)."""
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values or operator in ("In", "NotIn"):
        out["values"] = list(values)
    if min_values is not None:
        out["minValues"] = min_values
    return out


def nodeclaim(
    name: str = "default-abc12",
    *,
    pool: str = "default",
    node_class: str = "default",
    finalizers: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    deleted: str | None = None,
    requirements: Sequence[Mapping[str, Any]] | None = None,
    requests: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    expire_after: str | None = None,
    termination_grace_period: str | None = None,
    spec: Mapping[str, Any] | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    owners: Sequence[Mapping[str, Any]] = (),
    provider_id: str = "",
    node_name: str = "",
    capacity: Mapping[str, str] | None = None,
    conditions: Sequence[Mapping[str, str]] = (),
    status: Mapping[str, Any] | None = None,
    **status_fields: Any,
) -> dict[str, Any]:
    """A NodeClaim of `pool` and EC2NodeClass `node_class` with extra `labels`, `annotations`, `created`/`deleted`
    (creation/deletionTimestamp), `uid`, `resource_version` and `owners` (ownerReferences).

    Its spec: `requirements` (default: of `pool`), resource `requests`, `taints`, `startup_taints`, `expire_after`,
    `termination_grace_period`, then `spec` replacing top-level fields. Its status: `provider_id`, `node_name`,
    `capacity` (allocatable alike), `conditions`, the fields of `status` and other keyword arguments (no status at
    all without them)."""
    claim_spec: dict[str, Any] = {
        "nodeClassRef": {**_NODE_CLASS_REF, "name": node_class},
        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}],
    }
    if requirements is not None:
        claim_spec["requirements"] = copy.deepcopy(list(requirements))
    spec_shortcuts = {
        "resources": {"requests": dict(requests)} if requests else None,
        "taints": [dict(t) for t in taints],
        "startupTaints": [dict(t) for t in startup_taints],
        "expireAfter": expire_after,
        "terminationGracePeriod": termination_grace_period,
    }
    claim_spec |= {key: value for key, value in spec_shortcuts.items() if value}
    claim_spec.update(copy.deepcopy(dict(spec or {})))
    metadata: dict[str, Any] = {"name": name, "labels": {"karpenter.sh/nodepool": pool, **(labels or {})}}
    metadata_shortcuts = {
        "uid": uid,
        "resourceVersion": resource_version,
        "annotations": dict(annotations) if annotations else None,
        "finalizers": list(finalizers) if finalizers else None,
        "ownerReferences": [dict(owner) for owner in owners] if owners else None,
        "creationTimestamp": created,
        "deletionTimestamp": deleted,
    }
    metadata |= {key: value for key, value in metadata_shortcuts.items() if value is not None}
    manifest: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": metadata}
    manifest["spec"] = claim_spec
    shortcuts: dict[str, Any] = {"providerID": provider_id, "nodeName": node_name}
    if capacity:
        shortcuts |= {"capacity": dict(capacity), "allocatable": dict(capacity)}
    shortcuts["conditions"] = [dict(c) for c in conditions]
    claim_status = {
        **{key: value for key, value in shortcuts.items() if value},
        **copy.deepcopy(dict(status or {})),
        **copy.deepcopy(status_fields),
    }
    if claim_status:
        manifest["status"] = claim_status
    return manifest


def ec2nodeclass(
    name: str = "default",
    *,
    generation: int | None = None,
    uid: str | None = None,
    annotations: Mapping[str, str] | None = None,
    alias: str = "al2023@latest",
    discovery: str = "demo",
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A minimal valid EC2NodeClass of AMI `alias`, its subnets and security groups tagged karpenter.sh/discovery:
    `discovery`, at `generation`, with `uid`, `annotations` and `status`; keyword arguments replace top-level spec
    fields."""
    discovered = [{"tags": {"karpenter.sh/discovery": discovery}}]
    metadata: dict[str, Any] = {"name": name}
    metadata |= {key: value for key, value in (("uid", uid), ("generation", generation)) if value is not None}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": metadata,
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": alias}],
            "subnetSelectorTerms": copy.deepcopy(discovered),
            "securityGroupSelectorTerms": copy.deepcopy(discovered),
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    if status is not None:
        manifest["status"] = copy.deepcopy(dict(status))
    return manifest


def parsed_ec2nodeclass(name: str = "default", **fields: Any) -> api_ec2nodeclass.EC2NodeClass:
    """`ec2nodeclass(name, **fields)` through the real parser."""
    return parse.ec2nodeclass(ec2nodeclass(name, **fields))


def parsed_nodeclaim(name: str = "default-abc12", **fields: Any) -> api_nodeclaim.NodeClaim:
    """`nodeclaim(name, **fields)` through the real parser."""
    return parse.nodeclaim(nodeclaim(name, **fields))


ZONE_KEY = "topology.kubernetes.io/zone"
EBS_ZONE_KEY = "topology.ebs.csi.aws.com/zone"


def storage_class(
    name: str = "gp3",
    *,
    mode: str = "WaitForFirstConsumer",
    zones: Sequence[str] = (),
    key: str = ZONE_KEY,
    default: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "csi.storage.k8s.io/fstype": "xfs"},
        "reclaimPolicy": "Retain",
        "volumeBindingMode": mode,
    }
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": key, "values": list(zones)}]}]
    if default:
        body["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return body


def pvc(name: str, *, storage_class_name: str | None = "gp3", volume: str = "", size: str = "10Gi") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:  # bound, as the PV controller leaves a claim it bound
        spec["volumeName"] = volume
        metadata["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def pv(name: str, *, zone: str, key: str = ZONE_KEY, claim: str = "") -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    spec: dict[str, Any] = {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "gp3",
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    if claim:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}
