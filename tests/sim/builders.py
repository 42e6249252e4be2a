"""Object builders shared by the sim tests (import as `from tests.sim import builders`)."""

from __future__ import annotations

import copy
from typing import Any


def pod(
    name: str, *, labels: dict[str, str] | None = None, node: str | None = None, ready: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}
    if node:
        spec["nodeName"] = node
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }
    if ready:
        obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return obj


def pdb(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
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


def nodeclaim(name: str = "default-abcde", *, finalizers: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
        },
    }
    if finalizers:
        manifest["metadata"]["finalizers"] = list(finalizers)
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest
