"""Manifest builders shared by the api tests: minimal valid objects, deep-updated by keyword paths."""

from __future__ import annotations

import copy
from typing import Any


def nodepool_manifest(**spec: Any) -> dict[str, Any]:
    """A minimal valid NodePool; keyword arguments replace top-level spec fields."""
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
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


def with_template_spec(manifest: dict[str, Any], **fields: Any) -> dict[str, Any]:
    result = copy.deepcopy(manifest)
    result["spec"]["template"]["spec"].update(copy.deepcopy(fields))
    return result


def nodeclaim_manifest(**spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest


def ec2nodeclass_manifest(**spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest
