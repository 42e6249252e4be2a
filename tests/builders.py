"""Kubernetes object builders shared by every test folder (import as `from tests import builders`).

Each returns a fresh dict: callers may mutate it. Keyword parameters carry what tests vary; `namespace=None` leaves the
namespace out of the body, as a client posting to a namespaced URL does (the API server stamps it from the path).
"""

from __future__ import annotations

import copy
from typing import Any

NS = "default"
_NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _metadata(name: str, namespace: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    return metadata


def pod(
    name: str,
    *,
    namespace: str | None = NS,
    labels: dict[str, str] | None = None,
    node: str = "",
    cpu: str | None = "1",
    memory: str | None = None,
) -> dict[str, Any]:
    """A one-container pod requesting `cpu` and `memory` (None: no such request), bound to `node` if given."""
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    container: dict[str, Any] = {"name": "app", "image": "pause"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _metadata(name, namespace, labels or {}), "spec": spec}


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


def node(name: str, *, provider_id: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }
    if provider_id:
        obj["spec"]["providerID"] = provider_id
    return obj


def pdb(name: str, selector: dict[str, str], *, namespace: str | None = NS, **spec: Any) -> dict[str, Any]:
    """A PodDisruptionBudget over the pods labelled `selector`; keyword arguments are spec fields."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(name, namespace),
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A minimal valid NodePool (amd64, class `default`); keyword arguments replace top-level spec fields."""
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": dict(_NODE_CLASS_REF),
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                }
            }
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest


def nodeclaim(
    name: str, *, pool: str = "default", finalizers: list[str] | None = None, **status: Any
) -> dict[str, Any]:
    """A NodeClaim of `pool`; keyword arguments are status fields (no status at all without them)."""
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "nodeClassRef": dict(_NODE_CLASS_REF),
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}],
        },
    }
    if finalizers:
        manifest["metadata"]["finalizers"] = list(finalizers)
    if status:
        manifest["status"] = copy.deepcopy(status)
    return manifest


def ec2nodeclass(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A minimal valid EC2NodeClass (discovery tag `demo`); keyword arguments replace top-level spec fields."""
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest
