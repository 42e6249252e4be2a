"""Validate a plain dict against a CRD schema (`karpy.api.schema`): types, structure, defaults and paired CEL rules.

Implements the subset of OpenAPI v3 that the v1 CRDs use, with the API server's behaviour where it matters to a
user: nulls of non-nullable fields are pruned before defaulting, defaults are applied recursively, unknown fields
are refused (kubectl's strict field validation), and a CEL rule is evaluated only on a value whose subtree is
otherwise valid (its Python predicate may then assume the schema's shape). Every problem is collected with a
Kubernetes-style field path; nothing here raises on bad input.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Mapping
from typing import Any

from karpy.api import errors
from karpy.api.schema import core

PRESERVE = "x-kubernetes-preserve-unknown-fields"
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def validate(value: Any, schema: core.Schema, *, path: str = "") -> tuple[Any, list[errors.Problem]]:
    """Return (value with defaults applied, problems). The input is not modified."""
    problems: list[errors.Problem] = []
    result = _walk(value, schema, path, problems)
    return result, problems


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, key: int | str) -> str:
    return f"{path}[{key}]"


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    for type_, name in _TYPE_NAMES.items():
        if type(value) is type_:
            return name
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""The types JSON and YAML read into: none is a Mapping but dict, which `_is_mapping` answers without the ABC."""


def _is_mapping(value: Any) -> bool:
    """isinstance(value, Mapping), sparing the ABC's check for plain values (most of what is validated)."""
    kind = type(value)
    return kind is dict or (kind not in _PLAIN and isinstance(value, Mapping))


def has_type(value: Any, expected: str) -> bool:
    match expected:
        case "object":
            return _is_mapping(value)
        case "array":
            return isinstance(value, list | tuple)
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
    return True


def _walk(value: Any, schema: Mapping[str, Any], path: str, problems: list[errors.Problem], name: str = "value") -> Any:
    """Validate one node; `name` is the field's name for messages (\"unsupported operator ...\")."""
    before = len(problems)
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            problems.append(errors.Problem(path, f"must be an integer or a string, got {type_name(value)}"))
            return value
    elif "type" in schema and not has_type(value, schema["type"]):
        problems.append(errors.Problem(path, f"must be of type {schema['type']}, got {type_name(value)}"))
        return value

    result = value
    if _is_mapping(value):
        result = _walk_object(value, schema, path, problems)
    elif isinstance(value, list | tuple):
        result = _walk_array(value, schema, path, problems, name)
    elif isinstance(value, str):
        _check_string(value, schema, path, problems)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, schema, path, problems)
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(f'"{option}"' for option in schema["enum"])
        problems.append(errors.Problem(path, f"unsupported {name} {_quote(value)} (supported: {supported})"))

    if len(problems) == before:
        for rule in schema.get("x-kubernetes-validations", ()):
            if isinstance(rule, core.Rule) and rule.check is not None and not holds(rule, result):
                problems.append(errors.Problem(path, rule.message))
    return result


def holds(rule: core.Rule, value: Any) -> bool:
    assert rule.check is not None
    try:
        return bool(rule.check(value))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return False  # a CEL evaluation error rejects the object too


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _walk_object(
    value: Mapping[Any, Any], schema: Mapping[str, Any], path: str, problems: list[errors.Problem]
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    additional: Mapping[str, Any] | None = schema.get("additionalProperties")
    # e.g. metadata: {type: object}, or a subtree the API server keeps as it comes (EC2NodeClass spec.kubelet)
    open_object = bool(schema.get(PRESERVE)) or (not properties and additional is None)
    keeps_nulls = additional is not None and bool(additional.get(PRESERVE))
    result: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            problems.append(errors.Problem(path, f"field names must be strings, got {type_name(key)} {key!r}"))
            continue
        if item is None and (key in properties or (additional is not None and not keeps_nulls)):
            continue  # null of a non-nullable field: pruned, then defaulted
        if key in properties:
            result[key] = _walk(item, properties[key], child(path, key), problems, key)
        elif additional is not None:
            result[key] = _walk(item, additional, index(path, key), problems)
        elif open_object:
            result[key] = copy.deepcopy(item)
        else:
            problems.append(errors.Problem(child(path, key), "unknown field"))
            result[key] = copy.deepcopy(item)  # kept so that callers see what was refused
    for key, prop in properties.items():
        if key not in result and "default" in prop:
            result[key] = _walk(copy.deepcopy(prop["default"]), prop, child(path, key), problems, key)
    for key in schema.get("required", ()):
        if key not in result and not any(p.path == child(path, key) for p in problems):
            problems.append(errors.Problem(child(path, key), "Required value"))
    limit = schema.get("maxProperties")
    if limit is not None and len(result) > limit:
        problems.append(errors.Problem(path, f"must have at most {limit} entries, got {len(result)}"))
    return result


def _walk_array(
    value: list[Any] | tuple[Any, ...], schema: Mapping[str, Any], path: str, problems: list[errors.Problem], name: str
) -> list[Any]:
    items: Mapping[str, Any] = schema.get("items", {})
    item_name = name[:-1] if name.endswith("s") else name  # reasons[0] -> "reason"
    result = [_walk(item, items, index(path, i), problems, item_name) for i, item in enumerate(value)]
    _check_list_type(result, schema, path, problems)
    if "maxItems" in schema and len(result) > schema["maxItems"]:
        problems.append(errors.Problem(path, f"must have at most {schema['maxItems']} items, got {len(result)}"))
    if "minItems" in schema and len(result) < schema["minItems"]:
        problems.append(errors.Problem(path, f"must have at least {schema['minItems']} items, got {len(result)}"))
    return result


def _check_list_type(items: list[Any], schema: Mapping[str, Any], path: str, problems: list[errors.Problem]) -> None:
    """`x-kubernetes-list-type`: a set holds no value twice, a map no key twice (the API server refuses both)."""
    kind = schema.get("x-kubernetes-list-type")
    keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    seen: set[str] = set()
    for i, item in enumerate(items):
        if kind == "set":
            marker = json.dumps(item, sort_keys=True)
        elif kind == "map" and keys and isinstance(item, Mapping):
            marker = json.dumps([item.get(k) for k in keys])
        else:
            continue
        if marker in seen:
            problems.append(errors.Problem(index(path, i), f"Duplicate value: {marker}"))
        seen.add(marker)


def _check_string(value: str, schema: Mapping[str, Any], path: str, problems: list[errors.Problem]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        problems.append(errors.Problem(path, f"must be no more than {schema['maxLength']} characters"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        problems.append(errors.Problem(path, f"must be at least {schema['minLength']} characters"))
    # Go's regexp.MatchString finds a match anywhere: upstream's unanchored patterns ("subnet-[0-9a-z]+") rely on it.
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        problems.append(errors.Problem(path, f"invalid value {_quote(value)}: must match '{schema['pattern']}'"))
    if schema.get("format") == "date-time" and not is_timestamp(value):
        problems.append(errors.Problem(path, f"invalid value {_quote(value)}: must be an RFC 3339 date-time"))


def is_timestamp(value: str) -> bool:
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return "T" in value or "t" in value


def _check_number(value: float, schema: Mapping[str, Any], path: str, problems: list[errors.Problem]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(errors.Problem(path, f"must be greater than or equal to {schema['minimum']}, got {value}"))
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(errors.Problem(path, f"must be less than or equal to {schema['maximum']}, got {value}"))
    if schema.get("format") == "int32" and not -(2**31) <= value < 2**31:
        problems.append(errors.Problem(path, f"must fit in a 32-bit integer, got {value}"))
    if schema.get("format") == "int64" and not -(2**63) <= value < 2**63:
        problems.append(errors.Problem(path, f"must fit in a 64-bit integer, got {value}"))
