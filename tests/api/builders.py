"""Manifest builders of the api tests only (the NodePool and EC2NodeClass ones are `tests.builders`): a bare
NodeClaim with spec overrides, and a NodePool with template-spec overrides."""

from __future__ import annotations

import copy
from typing import Any


def with_template_spec(manifest: dict[str, Any], **fields: Any) -> dict[str, Any]:
    result = copy.deepcopy(manifest)
    result["spec"]["template"]["spec"].update(copy.deepcopy(fields))
    return result


def with_template_labels(manifest: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    result = copy.deepcopy(manifest)
    result["spec"]["template"].setdefault("metadata", {})["labels"] = dict(labels)
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
