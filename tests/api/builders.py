"""Manifest edits of the api tests only (the objects themselves come from `tests.builders`): a NodePool with
template-spec or template-label overrides."""

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
