"""`validator`'s walk compiled once per CRD schema into closures: the fast path of parsing NodeClaims, NodePools,
EC2NodeClasses and NodeOverlays.

A compiled check returns what `validator.validate` returns for a value in which it finds no problem (the value
with the schema's defaults applied, in fresh dicts and lists), or `FAIL` as soon as anything is off, without
saying what; `validate` then walks the value again to report every problem with its field path. The objects a
cluster holds are valid, and the cluster model parses every NodeClaim it is told of (explain parses each twice:
once as dumped, once with its Consolidatable condition brought up to date): walking each one with paths and
messages at the ready, looking every keyword up in the schema on the way, was most of the time a NodeClaim took
to parse (bench/explain.py). A check may refuse more than the walker (a mapping that is not a dict, a tuple, a
key that is not a `str`): that value only takes the walker's slower path. It must never accept what the walker
refuses, and must return what the walker returns.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import corecheck, errors, validator
from karpy.api.schema import core

FAIL = corecheck.FAIL
Check = Callable[[Any], Any]
Validate = Callable[[Any], tuple[Any, list[errors.Problem]]]
_INT_BOUNDS = {"int32": 2**31, "int64": 2**63}
_ANY: tuple[type, ...] = (dict, list, str, int, float, bool, type(None))
_ADMITTED: dict[Any, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
"""The types of a typed node's values the compiled checks read (`validator.has_type` admits more: those take the
walker's path); an unknown type admits anything, as it does there."""


def validate_with(schema: core.Schema) -> Validate:
    """`validator.validate(value, schema)` for many values: through the check compiled once, and through the walker
    only for a value the check refuses."""
    check = compile_schema(schema)

    def validate(value: Any) -> tuple[Any, list[errors.Problem]]:
        result = check(value)
        if result is FAIL:
            return validator.validate(value, schema)
        return result, []

    return validate


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """The check of one schema node, in `validator._walk`'s order: type, the value's own walk, enum, rules."""
    if schema.get("x-kubernetes-int-or-string"):
        admitted: tuple[type, ...] = (str, int)
    else:
        admitted = _ADMITTED.get(schema.get("type"), _ANY)
    # An untyped node admits lists and objects of untyped nodes, without end: their checks are built when needed.
    untyped = admitted is _ANY
    walks: dict[type, Callable[[Mapping[str, Any]], Check]] = {
        dict: _object, list: _array, str: _string, int: _number, float: _number
    }  # fmt: skip
    by_type = {
        kind: (_lazily(walks[kind], schema) if untyped else walks[kind](schema)) if kind in walks else _identity
        for kind in admitted
    }
    enum = schema.get("enum")
    rules = tuple(
        rule for rule in schema.get("x-kubernetes-validations", ()) if isinstance(rule, core.Rule) and rule.check
    )

    def check(value: Any) -> Any:
        walk = by_type.get(type(value))
        if walk is None:  # the wrong type; or a mapping but no dict, a tuple, a subclass: the walker's to say
            return FAIL
        result = walk(value)
        if result is FAIL or (enum is not None and value not in enum):
            return FAIL
        for rule in rules:
            if not validator.holds(rule, result):
                return FAIL
        return result

    return check


def _lazily(build: Callable[[Mapping[str, Any]], Check], schema: Mapping[str, Any]) -> Check:
    built: list[Check] = []

    def check(value: Any) -> Any:
        if not built:
            built.append(build(schema))
        return built[0](value)

    return check


def _identity(value: Any) -> Any:
    return value


def _object(schema: Mapping[str, Any]) -> Check:
    properties: Mapping[str, Any] = schema.get("properties", {})
    additional_schema: Mapping[str, Any] | None = schema.get("additionalProperties")
    checks = {key: compile_schema(prop) for key, prop in properties.items()}
    additional = compile_schema(additional_schema) if additional_schema is not None else None
    open_object = bool(schema.get(validator.PRESERVE)) or (not properties and additional_schema is None)
    keeps_nulls = additional_schema is not None and bool(additional_schema.get(validator.PRESERVE))
    pruned = frozenset(properties) if additional is None or keeps_nulls else None  # None: every key
    defaults = tuple((key, checks[key], prop["default"]) for key, prop in properties.items() if "default" in prop)
    required = tuple(schema.get("required", ()))
    limit = schema.get("maxProperties")

    def check(value: dict[Any, Any]) -> Any:
        result: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return FAIL
            if item is None and (pruned is None or key in pruned):
                continue  # null of a non-nullable field: pruned, then defaulted
            sub = checks.get(key)
            if sub is not None:
                out = sub(item)
            elif additional is not None:
                out = additional(item)
            elif open_object:
                out = copy.deepcopy(item)
            else:
                return FAIL  # an unknown field
            if out is FAIL:
                return FAIL
            result[key] = out
        for key, sub, default in defaults:
            if key not in result:
                out = sub(default)  # read into fresh dicts and lists, as every value is: the schema's stays its own
                if out is FAIL:
                    return FAIL
                result[key] = out
        for key in required:
            if key not in result:
                return FAIL
        if limit is not None and len(result) > limit:
            return FAIL
        return result

    return check


def _array(schema: Mapping[str, Any]) -> Check:
    item_check = compile_schema(schema.get("items", {}))
    list_type = schema.get("x-kubernetes-list-type")
    map_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    most, least = schema.get("maxItems"), schema.get("minItems")

    def check(value: list[Any]) -> Any:
        result = []
        for item in value:
            out = item_check(item)
            if out is FAIL:
                return FAIL
            result.append(out)
        if (list_type == "set" or (list_type == "map" and map_keys)) and not _unique(result, list_type, map_keys):
            return FAIL
        if (most is not None and len(result) > most) or (least is not None and len(result) < least):
            return FAIL
        return result

    return check


def _unique(items: list[Any], list_type: str, keys: tuple[str, ...]) -> bool:
    """`validator._check_list_type` finds no duplicate (nor raises: the walker then says what it does)."""
    seen: set[str] = set()
    try:
        for item in items:
            if list_type == "set":
                marker = json.dumps(item, sort_keys=True)
            elif isinstance(item, Mapping):
                marker = json.dumps([item.get(k) for k in keys])
            else:
                continue
            if marker in seen:
                return False
            seen.add(marker)
    except Exception:
        return False
    return True


def _string(schema: Mapping[str, Any]) -> Check:
    most, least = schema.get("maxLength"), schema.get("minLength")
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
    timestamp = schema.get("format") == "date-time"

    def check(value: str) -> Any:
        if (most is not None and len(value) > most) or (least is not None and len(value) < least):
            return FAIL
        # Go's regexp.MatchString finds a match anywhere, as `validator` does
        if pattern is not None and pattern.search(value) is None:
            return FAIL
        if timestamp and not validator.is_timestamp(value):
            return FAIL
        return value

    return check


def _number(schema: Mapping[str, Any]) -> Check:
    low, high = schema.get("minimum"), schema.get("maximum")
    bound = _INT_BOUNDS.get(schema.get("format", ""))

    def check(value: float) -> Any:
        if (low is not None and value < low) or (high is not None and value > high):
            return FAIL
        if bound is not None and not -bound <= value < bound:
            return FAIL
        return value

    return check
