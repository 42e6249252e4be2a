"""Object builders shared by the kube and state tests (import as `from tests.kube import builders`)."""

from __future__ import annotations

import copy
from typing import Any

NS = "default"


def pod(name: str, *, namespace: str = NS, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy whose status says Running and Ready (what a PDB counts as healthy)."""
    out = copy.deepcopy(obj)
    out["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return out


def unschedulable(obj: dict[str, Any]) -> dict[str, Any]:
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


def pdb(name: str, selector: dict[str, str], *, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                }
            }
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest


def nodeclaim(name: str, *, pool: str = "default", **status: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}],
        },
    }
    if status:
        manifest["status"] = copy.deepcopy(status)
    return manifest


def ec2nodeclass(name: str = "default", **spec: Any) -> dict[str, Any]:
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
