"""Checks upstream makes in the controller rather than the CRD (core: nodepool_validation.go, requirements.go).

They run on schema-valid, defaulted dicts and never repeat a problem the schema already reported at the same path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from karpy.api import cron, errors, labels
from karpy.api.schema import core

_QUALIFIED = re.compile(core.QUALIFIED_NAME_PATTERN)
_LABEL_VALUE = re.compile(core.LABEL_VALUE_PATTERN)


class Collector:
    """Appends semantic problems unless the schema already reported one at that path."""

    def __init__(self, problems: list[errors.Problem]) -> None:
        self.problems = problems
        self._seen = {p.path for p in problems}

    def add(self, path: str, message: str) -> None:
        if path not in self._seen:
            self._seen.add(path)
            self.problems.append(errors.Problem(path, message))


def label_key(key: str) -> str | None:
    """Why `key` is not a valid label key, or None (apimachinery IsQualifiedName, 63-char name part)."""
    name = key.rsplit("/", 1)[-1]
    prefix = key[: -len(name) - 1] if "/" in key else ""
    if not _QUALIFIED.match(key) or len(name) > 63 or len(prefix) > 253:
        return (
            f'invalid label key "{key}": must be a qualified name (optional DNS prefix and "/", then at most 63 '
            "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
        )
    return None


def requirements(items: list[Mapping[str, Any]], path: str, out: Collector) -> None:
    for i, req in enumerate(items):
        key = req["key"]
        if labels.is_restricted_label(labels.normalize_label(key)):
            out.add(f"{path}[{i}].key", f'label "{key}" is restricted')
        elif reason := label_key(key):
            out.add(f"{path}[{i}].key", reason)
        for j, value in enumerate(req.get("values", ())):
            if req["operator"] in ("In", "NotIn") and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                out.add(f"{path}[{i}].values[{j}]", f'invalid label value "{value}"')


def template_labels(values: Mapping[str, str], path: str, out: Collector) -> None:
    for key in values:
        if labels.is_restricted_label(labels.normalize_label(key)) or key == labels.LABEL_NODEPOOL:
            out.add(f"{path}[{key}]", f'label "{key}" is restricted')
        elif reason := label_key(key):
            out.add(f"{path}[{key}]", reason)


def taints(spec: Mapping[str, Any], path: str, out: Collector) -> None:
    """Taints and startupTaints together may not repeat a key/effect pair (core: validateTaints)."""
    seen: set[tuple[str, str]] = set()
    for field in ("taints", "startupTaints"):
        for i, taint in enumerate(spec.get(field, ())):
            pair = (taint["key"], taint["effect"])
            if pair in seen:
                out.add(f"{path}.{field}[{i}]", f'duplicate taint key/effect pair "{pair[0]}:{pair[1]}"')
            seen.add(pair)


def budgets(items: list[Mapping[str, Any]], path: str, out: Collector) -> None:
    for i, budget in enumerate(items):
        if "schedule" in budget and (reason := cron.problem(budget["schedule"])):
            out.add(f"{path}[{i}].schedule", f"invalid cron schedule: {reason}")
