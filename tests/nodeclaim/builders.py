"""Builders for NodeClaim / Node / Pod dicts shared by the nodeclaim and termination tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import decoding, labels, nodeclaim, parse

T0 = 1_700_000_000.0


def ts(epoch: float) -> str:
    return decoding.format_timestamp(epoch)


def claim_dict(
    name: str = "default-abc12",
    *,
    created: float = T0,
    pool: str = "default",
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    requests: Mapping[str, str] | None = None,
    expire_after: str = "720h",
    tgp: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    deleted: float | None = None,
    finalizers: Sequence[str] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        "resources": {"requests": dict(requests or {"cpu": "1", "memory": "1Gi"})},
        "expireAfter": expire_after,
    }
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if startup_taints:
        spec["startupTaints"] = [dict(t) for t in startup_taints]
    if tgp is not None:
        spec["terminationGracePeriod"] = tgp
    md: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": ts(created),
        "labels": {labels.LABEL_NODEPOOL: pool, **(extra_labels or {})},
        "annotations": dict(annotations or {}),
        "finalizers": list(finalizers),
    }
    if deleted is not None:
        md["deletionTimestamp"] = ts(deleted)
    out: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": md, "spec": spec}
    if status:
        out["status"] = dict(status)
    return out


def claim(name: str = "default-abc12", **kwargs: Any) -> nodeclaim.NodeClaim:
    return parse.nodeclaim(claim_dict(name, **kwargs))


def cond(type_: str, status: str, at: float, reason: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason or type_, "message": "", "lastTransitionTime": ts(at)}


def node_dict(
    name: str = "ip-10-0-0-1",
    *,
    provider_id: str = "fake://zone-a/i-00000001",
    ready: bool = True,
    taints: Sequence[Mapping[str, str]] = ({"key": labels.TAINT_UNREGISTERED_KEY, "effect": "NoExecute"},),
    node_labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    finalizers: Sequence[str] = (),
    deleted: float | None = None,
    owners: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    md: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "labels": dict(node_labels or {}),
        "finalizers": list(finalizers),
    }
    if owners:
        md["ownerReferences"] = [dict(o) for o in owners]
    if deleted is not None:
        md["deletionTimestamp"] = ts(deleted)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": md,
        "spec": {"providerID": provider_id, "taints": [dict(t) for t in taints]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": dict(allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}),
        },
    }


def pod_dict(
    name: str,
    *,
    namespace: str = "default",
    node: str = "ip-10-0-0-1",
    pod_labels: Mapping[str, str] | None = None,
    daemon: bool = False,
    mirror: bool = False,
    priority_class: str = "",
    phase: str = "Running",
    annotations: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    grace: int | None = None,
    started: float | None = T0,
    deleted: float | None = None,
    ready: bool = True,
    pvcs: Sequence[str] = (),
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    owners: list[dict[str, Any]] = []
    if daemon:
        owners.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": True})
    if mirror:
        owners.append({"apiVersion": "v1", "kind": "Node", "name": node, "uid": "n", "controller": True})
    if owner is not None:
        owners.append(dict(owner))
    md: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(pod_labels or {}),
        "annotations": dict(annotations or {}),
        "creationTimestamp": ts(T0),
        "ownerReferences": owners,
    }
    if deleted is not None:
        md["deletionTimestamp"] = ts(deleted)
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if pvcs:
        spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(pvcs)]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if started is not None:
        status["startTime"] = ts(started)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}
