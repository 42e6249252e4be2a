"""Checks upstream makes in the controller rather than the CRD: a NodePool's RuntimeValidate (core:
pkg/apis/v1/nodepool_validation.go, nodeclaim_validation.go ValidateRequirement, validateWellKnownValues). A NodePool
failing them is stored by the API server but not used (upstream: ValidationSucceeded=False). NodeClaims have no
runtime validation upstream, so none of this runs on them.

They run on schema-valid, defaulted dicts and never repeat a problem the schema already reported at the same path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

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


WELL_KNOWN_VALUES: Final[Mapping[str, frozenset[str]]] = {
    # core WellKnownValuesForRequirements, which aws extends with the tenancy values.
    labels.LABEL_CAPACITY_TYPE: frozenset(labels.CAPACITY_TYPES),
    labels.LABEL_INSTANCE_TENANCY: frozenset({"default", "dedicated"}),
}


def requirements(items: list[Mapping[str, Any]], path: str, out: Collector) -> None:
    for i, req in enumerate(items):
        key = req["key"]
        if labels.is_restricted_label(labels.normalize_label(key)):
            out.add(f"{path}[{i}].key", f'label "{key}" is restricted')
        elif reason := label_key(key):
            out.add(f"{path}[{i}].key", reason)
        for j, value in enumerate(req.get("values", ())):
            if len(value) > 63 or not _LABEL_VALUE.match(value):
                out.add(f"{path}[{i}].values[{j}]", f'invalid label value "{value}"')
        if reason := _unknown_values(req):
            out.add(f"{path}[{i}].values", reason)


def _unknown_values(req: Mapping[str, Any]) -> str | None:
    """Why an `In` requirement on a label with known values cannot be met (core: validateWellKnownValues): none of
    its values is known, or fewer than its minValues are. Some unknown values beside known ones are allowed."""
    known = WELL_KNOWN_VALUES.get(req["key"])
    if known is None or req["operator"] != "In":
        return None
    valid = [v for v in req.get("values", ()) if v in known]
    if not valid:
        return f"no valid values for {req['key']}, expected one of: {', '.join(sorted(known))}"
    if len(valid) < req.get("minValues", 0):
        return f"not enough valid values for {req['key']} to satisfy minValues {req['minValues']}"
    return None


def template_labels(values: Mapping[str, str], path: str, out: Collector) -> None:
    for key in values:
        if labels.is_restricted_label(labels.normalize_label(key)) or key == labels.LABEL_NODEPOOL:
            out.add(f"{path}[{key}]", f'label "{key}" is restricted')
        elif reason := label_key(key):
            out.add(f"{path}[{key}]", reason)


def taints(spec: Mapping[str, Any], path: str, out: Collector) -> None:
    """Keys and values are qualified names (the CRD's pattern has no length limits), and taints and startupTaints
    together may not repeat a key/effect pair (core: validateTaintsField)."""
    seen: set[tuple[str, str]] = set()
    for field in ("taints", "startupTaints"):
        for i, taint in enumerate(spec.get(field, ())):
            for part in ("key", "value"):
                if taint.get(part) and (reason := label_key(taint[part])):
                    out.add(f"{path}.{field}[{i}].{part}", reason.replace("label key", f"taint {part}"))
            pair = (taint["key"], taint["effect"])
            if pair in seen:
                out.add(f"{path}.{field}[{i}]", f'duplicate taint key/effect pair "{pair[0]}:{pair[1]}"')
            seen.add(pair)


def budgets(items: list[Mapping[str, Any]], path: str, out: Collector) -> None:
    for i, budget in enumerate(items):
        if "schedule" in budget and (reason := cron.problem(budget["schedule"])):
            out.add(f"{path}[{i}].schedule", f"invalid cron schedule: {reason}")
