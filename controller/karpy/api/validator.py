"""Validate a plain dict against a CRD schema (`karpy.api.schema`): types, structure, defaults and paired CEL rules.

Implements the subset of OpenAPI v3 that the v1 CRDs use, with the API server's behaviour where it matters to a
user: nulls of non-nullable fields are pruned before defaulting, defaults are applied recursively, unknown fields
are refused (kubectl's strict field validation), and a CEL rule is evaluated only on a value whose subtree is
otherwise valid (its Python predicate may then assume the schema's shape). Nothing here raises on bad input.

A schema is compiled once into closures, one per schema node, that each take a problem sink. Without one (`None`)
a check stops at the first problem and returns `FAIL` without saying what: the objects a cluster holds are valid,
and the cluster model parses every NodeClaim it is told of (explain parses each twice), so formatting paths and
messages at the ready, or looking every keyword up in the schema on the way, was most of the time a NodeClaim took
to parse (bench/explain.py). With a list, the same closures record every problem with its Kubernetes-style field
path and go on; `validate` reads a value that way only when the fast answer is `FAIL`. The fast answer also refuses
a value of an unusual Python type (a mapping that is not a dict, a tuple, a `str` subclass key): the second reading
then says whether anything is wrong with it.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from karpy.api import errors
from karpy.api.schema import core

PRESERVE = "x-kubernetes-preserve-unknown-fields"


class _Fail:
    __slots__ = ()

    def __repr__(self) -> str:
        return "FAIL"


FAIL: Final = _Fail()
"""What a check without a problem sink returns for a value with any problem (here and in `corecheck`)."""
Check = Callable[[Any, str, list[errors.Problem] | None], Any]
"""A schema node's check: (value, its path, the problem sink or None) -> the value read, with the schema's defaults
applied in fresh dicts and lists; or `FAIL`, only when the sink is None."""
Validate = Callable[[Any], tuple[Any, list[errors.Problem]]]
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
_INT_BOUNDS: dict[str, tuple[int, int]] = {"int32": (2**31, 32), "int64": (2**63, 64)}
_ANY: tuple[type, ...] = (dict, list, str, int, float, bool, type(None))
_ADMITTED: dict[Any, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
"""The exact types of a typed node's values the fast answer reads (`has_type` admits more: those are read with the
sink); an unknown type admits anything."""
_CACHE_SIZE = 64


def validate(value: Any, schema: core.Schema, *, path: str = "") -> tuple[Any, list[errors.Problem]]:
    """Return (value with defaults applied, problems). The input is not modified."""
    return _validate(_compiled(schema), value, path)


def validate_with(schema: core.Schema) -> Validate:
    """`validate(value, schema)` for many values, the schema compiled once."""
    check = compile_schema(schema)
    return lambda value: _validate(check, value, "")


def _validate(check: Check, value: Any, path: str) -> tuple[Any, list[errors.Problem]]:
    result = check(value, path, None)
    if result is not FAIL:
        return result, []
    problems: list[errors.Problem] = []  # something is off: read again, saying what and where
    return check(value, path, problems), problems


_compiled_checks: dict[int, tuple[core.Schema, Check]] = {}


def _compiled(schema: core.Schema) -> Check:
    """The check of `schema`, compiled once for the few schemas validated again and again (the emulated API server's
    four CRDs, the typed kubelet): a schema is built, then only read. An entry holds its schema, so that the id is
    not reused while it is cached; the cache is emptied when full (tests build schemas by the hundred)."""
    found = _compiled_checks.get(id(schema))
    if found is not None and found[0] is schema:
        return found[1]
    if len(_compiled_checks) >= _CACHE_SIZE:
        _compiled_checks.clear()
    check = compile_schema(schema)
    _compiled_checks[id(schema)] = (schema, check)
    return check


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


def has_type(value: Any, expected: str) -> bool:
    match expected:
        case "object":
            return isinstance(value, Mapping)
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


def holds(rule: core.Rule, value: Any) -> bool:
    assert rule.check is not None
    try:
        return bool(rule.check(value))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return False  # a CEL evaluation error rejects the object too


def is_timestamp(value: str) -> bool:
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return "T" in value or "t" in value


def compile_schema(schema: Mapping[str, Any], name: str = "value") -> Check:
    """The check of one schema node, in this order: type, the value's own walk, enum, then the rules (only on a
    value with no problem of its own). `name` is the field's name for messages ("unsupported operator ...")."""
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    expected = schema.get("type")
    admitted = (str, int) if int_or_string else _ADMITTED.get(expected, _ANY)
    built: dict[type, Check] = {}

    def walk_of(kind: type) -> Check:
        found = built.get(kind)
        if found is None:
            found = built[kind] = _WALKS[kind](schema, name)
        return found

    # An untyped node admits lists and objects of untyped nodes, without end: their walks are built when needed.
    untyped = admitted is _ANY
    by_type = {
        kind: (_lazily(walk_of, kind) if untyped else walk_of(kind)) if kind in _WALKS else _identity
        for kind in admitted
    }
    enum = schema.get("enum")
    rules = tuple(
        rule
        for rule in schema.get("x-kubernetes-validations", ())
        if isinstance(rule, core.Rule) and rule.check is not None
    )

    def unusual(value: Any, path: str, problems: list[errors.Problem] | None) -> Check:
        """The walk of a value of a type `by_type` does not hold: `_refused` without a sink, `_wrong_type` when the
        sink says it has the wrong type."""
        if problems is None:
            return _refused
        if int_or_string:
            if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
                problems.append(errors.Problem(path, f"must be an integer or a string, got {type_name(value)}"))
                return _wrong_type
        elif expected is not None and not has_type(value, expected):
            problems.append(errors.Problem(path, f"must be of type {expected}, got {type_name(value)}"))
            return _wrong_type
        if isinstance(value, Mapping):
            return walk_of(dict)
        if isinstance(value, list | tuple):
            return walk_of(list)
        if isinstance(value, str):
            return walk_of(str)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return walk_of(int)
        return _identity

    def plain(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
        """The check of a node with neither enum nor rules (most): its type, then its walk."""
        return (by_type.get(type(value)) or unusual(value, path, problems))(value, path, problems)

    if enum is None and not rules:
        return plain

    def check(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
        walk = by_type.get(type(value)) or unusual(value, path, problems)
        if walk is _wrong_type:
            return value
        before = 0 if problems is None else len(problems)
        result = walk(value, path, problems)
        if result is FAIL:
            return FAIL
        if enum is not None and value not in enum:
            if problems is None:
                return FAIL
            supported = ", ".join(f'"{option}"' for option in enum)
            problems.append(errors.Problem(path, f"unsupported {name} {_quote(value)} (supported: {supported})"))
        if problems is None or len(problems) == before:
            for rule in rules:
                if not holds(rule, result):
                    if problems is None:
                        return FAIL
                    problems.append(errors.Problem(path, rule.message))
        return result

    return check


def _lazily(walk_of: Callable[[type], Check], kind: type) -> Check:
    return lambda value, path, problems: walk_of(kind)(value, path, problems)


def _identity(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
    return value


def _wrong_type(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
    return value  # as it came, its problem said


def _refused(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
    return FAIL


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _object(schema: Mapping[str, Any], name: str) -> Check:
    properties: Mapping[str, Any] = schema.get("properties", {})
    additional_schema: Mapping[str, Any] | None = schema.get("additionalProperties")
    checks = {key: compile_schema(prop, key) for key, prop in properties.items()}
    additional = compile_schema(additional_schema) if additional_schema is not None else None
    # e.g. metadata: {type: object}, or a subtree the API server keeps as it comes (EC2NodeClass spec.kubelet)
    open_object = bool(schema.get(PRESERVE)) or (not properties and additional_schema is None)
    keeps_nulls = additional_schema is not None and bool(additional_schema.get(PRESERVE))
    pruned = frozenset(properties) if additional is None or keeps_nulls else None  # None: every key
    defaults = tuple((key, checks[key], prop["default"]) for key, prop in properties.items() if "default" in prop)
    required = tuple(schema.get("required", ()))
    limit = schema.get("maxProperties")

    def walk(value: Mapping[Any, Any], path: str, problems: list[errors.Problem] | None) -> Any:
        result: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                if problems is None:
                    return FAIL
                if not isinstance(key, str):
                    problems.append(errors.Problem(path, f"field names must be strings, got {type_name(key)} {key!r}"))
                    continue
            if item is None and (pruned is None or key in pruned):
                continue  # null of a non-nullable field: pruned, then defaulted
            sub = checks.get(key)
            if sub is not None:
                out = sub(item, path if problems is None else child(path, key), problems)
            elif additional is not None:
                out = additional(item, path if problems is None else index(path, key), problems)
            elif open_object:
                out = copy.deepcopy(item)
            else:
                if problems is None:
                    return FAIL
                problems.append(errors.Problem(child(path, key), "unknown field"))
                out = copy.deepcopy(item)  # kept so that callers see what was refused
            if out is FAIL:
                return FAIL
            result[key] = out
        for key, sub, default in defaults:
            if key not in result:
                # read into fresh dicts and lists, as every value is: the schema's stays its own (a value with a
                # problem may be returned as it is)
                if problems is None:
                    out = sub(default, path, None)
                    if out is FAIL:
                        return FAIL
                else:
                    out = sub(copy.deepcopy(default), child(path, key), problems)
                result[key] = out
        for key in required:
            if key not in result:
                if problems is None:
                    return FAIL
                at = child(path, key)
                if not any(p.path == at for p in problems):
                    problems.append(errors.Problem(at, "Required value"))
        if limit is not None and len(result) > limit:
            if problems is None:
                return FAIL
            problems.append(errors.Problem(path, f"must have at most {limit} entries, got {len(result)}"))
        return result

    return walk


def _array(schema: Mapping[str, Any], name: str) -> Check:
    item_check = compile_schema(schema.get("items", {}), name[:-1] if name.endswith("s") else name)  # reasons[0]
    list_type: str = schema.get("x-kubernetes-list-type", "")
    map_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    unique = list_type == "set" or (list_type == "map" and bool(map_keys))
    most, least = schema.get("maxItems"), schema.get("minItems")
    sizes: list[Limit] = []
    if most is not None:
        sizes.append(
            (lambda items: len(items) > most, lambda items: f"must have at most {most} items, got {len(items)}")
        )
    if least is not None:
        sizes.append(
            (lambda items: len(items) < least, lambda items: f"must have at least {least} items, got {len(items)}")
        )
    size_check = _limited(tuple(sizes))

    def walk(value: list[Any] | tuple[Any, ...], path: str, problems: list[errors.Problem] | None) -> Any:
        result = []
        for i, item in enumerate(value):
            out = item_check(item, path if problems is None else index(path, i), problems)
            if out is FAIL:
                return FAIL
            result.append(out)
        if unique:
            if problems is None:
                try:
                    if next(_duplicates(result, list_type, map_keys), None) is not None:
                        return FAIL
                except Exception:
                    return FAIL  # read again, which then raises where it does
            else:
                for i, marker in _duplicates(result, list_type, map_keys):
                    problems.append(errors.Problem(index(path, i), f"Duplicate value: {marker}"))
        return size_check(result, path, problems)

    return walk


def _duplicates(items: list[Any], list_type: str, keys: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """`x-kubernetes-list-type`: a set holds no value twice, a map no key twice (the API server refuses both)."""
    seen: set[str] = set()
    for i, item in enumerate(items):
        if list_type == "set":
            marker = json.dumps(item, sort_keys=True)
        elif isinstance(item, Mapping):
            marker = json.dumps([item.get(k) for k in keys])
        else:
            continue
        if marker in seen:
            yield i, marker
        seen.add(marker)


Limit = tuple[Callable[[Any], bool], Callable[[Any], str]]
"""(whether a value breaks the limit, the message saying how): the message is made only for a sink."""


def _limited(limits: tuple[Limit, ...]) -> Check:
    """The walk of a value with only limits to keep: itself, or `FAIL` at the first one it breaks without a sink."""
    if not limits:
        return _identity  # most strings and numbers: no loop to run

    def walk(value: Any, path: str, problems: list[errors.Problem] | None) -> Any:
        for breaks, message in limits:
            if breaks(value):
                if problems is None:
                    return FAIL
                problems.append(errors.Problem(path, message(value)))
        return value

    return walk


def _string(schema: Mapping[str, Any], name: str) -> Check:
    most, least = schema.get("maxLength"), schema.get("minLength")
    limits: list[Limit] = []
    if most is not None:
        limits.append((lambda text: len(text) > most, lambda text: f"must be no more than {most} characters"))
    if least is not None:
        limits.append((lambda text: len(text) < least, lambda text: f"must be at least {least} characters"))
    if "pattern" in schema:
        # Go's regexp.MatchString finds a match anywhere: upstream's unanchored patterns ("subnet-[0-9a-z]+") rely on it
        search, source = re.compile(schema["pattern"]).search, schema["pattern"]
        limits.append(
            (lambda text: search(text) is None, lambda text: f"invalid value {_quote(text)}: must match '{source}'")
        )
    if schema.get("format") == "date-time":
        limits.append(
            (
                lambda text: not is_timestamp(text),
                lambda text: f"invalid value {_quote(text)}: must be an RFC 3339 date-time",
            )
        )
    return _limited(tuple(limits))


def _number(schema: Mapping[str, Any], name: str) -> Check:
    low, high = schema.get("minimum"), schema.get("maximum")
    limits: list[Limit] = []
    if low is not None:
        limits.append((lambda n: n < low, lambda n: f"must be greater than or equal to {low}, got {n}"))
    if high is not None:
        limits.append((lambda n: n > high, lambda n: f"must be less than or equal to {high}, got {n}"))
    if schema.get("format", "") in _INT_BOUNDS:
        bound, bits = _INT_BOUNDS[schema["format"]]
        limits.append((lambda n: not -bound <= n < bound, lambda n: f"must fit in a {bits}-bit integer, got {n}"))
    return _limited(tuple(limits))


_WALKS: dict[type, Callable[[Mapping[str, Any], str], Check]] = {
    dict: _object, list: _array, str: _string, int: _number, float: _number
}  # fmt: skip
