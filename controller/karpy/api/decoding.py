"""Turn schema-validated, defaulted dicts into the frozen v1 dataclasses (shared parts: metadata, taints, ...).

Callers validate first (`karpy.api.validator`); these helpers may then rely on the schema's shape. Metadata has no
CRD schema (`metadata: {type: object}`), so `metadata` checks its own shape and reports problems instead.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from karpy.api import errors, meta, quantity


def frozen_map(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value)) if value else meta.EMPTY


def timestamp(text: str) -> float:
    """RFC 3339 -> epoch seconds (raises ValueError)."""
    parsed = datetime.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


def timestamp_or_none(value: Any) -> float | None:
    """An RFC 3339 field of a manifest as epoch seconds; None when absent, not a string, or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return timestamp(value)
    except ValueError:
        return None


def format_timestamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _string_map(value: Any, path: str, problems: list[errors.Problem]) -> Mapping[str, str]:
    if value is None:
        return meta.EMPTY
    if not isinstance(value, Mapping):
        problems.append(errors.Problem(path, "must be a map of strings"))
        return meta.EMPTY
    bad = [k for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)]
    for key in bad:
        problems.append(errors.Problem(f"{path}[{key}]", "keys and values must be strings"))
    return frozen_map({k: v for k, v in value.items() if k not in bad})


def metadata(value: Any, problems: list[errors.Problem], *, require_name: bool = True) -> meta.ObjectMeta:
    """ObjectMeta from `metadata`; problems are appended (never raised)."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        problems.append(errors.Problem("metadata", "must be an object"))
        return meta.ObjectMeta(name="")

    def text(key: str) -> str:
        item = value.get(key, "")
        if item is None:
            return ""
        if not isinstance(item, str):
            problems.append(errors.Problem(f"metadata.{key}", "must be a string"))
            return ""
        return item

    def moment(key: str) -> float | None:
        item = value.get(key)
        if item is None:
            return None
        try:
            if isinstance(item, str):
                return timestamp(item)
        except (ValueError, OverflowError):
            pass
        problems.append(errors.Problem(f"metadata.{key}", f"must be an RFC 3339 timestamp, got {item!r}"))
        return None

    name, generate_name = text("name"), text("generateName")
    if require_name and not name and not generate_name:
        problems.append(errors.Problem("metadata.name", "Required value: name or generateName is required"))
    generation = value.get("generation", 0)
    if generation is None:
        generation = 0
    if not isinstance(generation, int) or isinstance(generation, bool):
        problems.append(errors.Problem("metadata.generation", "must be an integer"))
        generation = 0
    finalizers = value.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        problems.append(errors.Problem("metadata.finalizers", "must be a list of strings"))
        finalizers = []
    owners = value.get("ownerReferences") or []
    if not isinstance(owners, list) or not all(isinstance(o, Mapping) for o in owners):
        problems.append(errors.Problem("metadata.ownerReferences", "must be a list of objects"))
        owners = []
    return meta.ObjectMeta(
        name=name,
        namespace=text("namespace"),
        uid=text("uid"),
        labels=_string_map(value.get("labels"), "metadata.labels", problems),
        annotations=_string_map(value.get("annotations"), "metadata.annotations", problems),
        generation=generation,
        resource_version=text("resourceVersion"),
        creation_timestamp=moment("creationTimestamp"),
        deletion_timestamp=moment("deletionTimestamp"),
        finalizers=tuple(finalizers),
        owner_references=tuple(frozen_map(o) for o in owners),
        generate_name=generate_name,
    )


def taints(items: list[Mapping[str, Any]] | None) -> tuple[meta.Taint, ...]:
    return tuple(meta.Taint(key=t["key"], effect=t["effect"], value=t.get("value", "")) for t in items or ())


def requirements(items: list[Mapping[str, Any]] | None) -> tuple[meta.NodeSelectorRequirement, ...]:
    return tuple(
        meta.NodeSelectorRequirement(
            key=r["key"],
            operator=meta.Operator(r["operator"]),
            values=tuple(r.get("values", ())),
            min_values=r.get("minValues"),
        )
        for r in items or ()
    )


def node_class_ref(value: Mapping[str, Any]) -> meta.NodeClassRef:
    return meta.NodeClassRef(group=value["group"], kind=value["kind"], name=value["name"])


def conditions(items: list[Mapping[str, Any]] | None) -> tuple[meta.Condition, ...]:
    return tuple(
        meta.Condition(
            type=c["type"],
            status=c["status"],
            reason=c.get("reason", ""),
            message=c.get("message", ""),
            last_transition_time=timestamp(c["lastTransitionTime"]) if "lastTransitionTime" in c else None,
            observed_generation=c.get("observedGeneration", 0),
        )
        for c in items or ()
    )


def resources(value: Mapping[str, Any] | None, path: str, problems: list[errors.Problem]) -> dict[str, int]:
    """A ResourceList in milli-units; amounts the schema's pattern admits but quantity.parse refuses are problems."""
    result: dict[str, int] = {}
    for name, amount in (value or {}).items():
        try:
            result[name] = quantity.parse(amount)
        except quantity.QuantityError as exc:
            problems.append(errors.Problem(f"{path}[{name}]", str(exc)))
    return result
