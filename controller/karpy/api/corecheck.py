"""`corekinds`' structural check, compiled once per schema into closures that each take a problem sink.

A check returns the value read (without its nulls: the same object when it had none). Without a sink (`None`) it
stops at the first problem and returns `FAIL` without saying what: the objects a cluster holds are almost always
valid, and the state cache reads every pod and node it is told of; formatting paths and messages at the ready was
most of the time it took to build the model of a 5,000-node cluster (bench/explain.py). With a list, the same
closures record every problem with its field path and go on; `corekinds.read` reads that way only when the fast
answer is `FAIL`. The fast answer also refuses a value of an unusual Python type (a mapping that is not a dict, an
int subclass) and a null list item: the second reading then says whether anything is wrong with it.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from karpy.api import decoding, errors, quantity, validator

FAIL = validator.FAIL
Problems = list[errors.Problem] | None
Check = Callable[[Any, str, Problems], Any]

_INT_RANGES: Final = {"int32": 2**31, "int64": 2**63, "integer": 2**63}


def compile_kinds(definitions: Mapping[str, Any], kinds: Mapping[str, Any], *, strict: bool) -> Mapping[str, Check]:
    """`"<apiVersion>/<kind>"` -> the check of that kind's body, for `corekinds.read(..., strict=strict)`."""
    compiler = _Compiler(definitions, strict=strict)
    return {name: compiler.node(node) for name, node in kinds.items()}


class _Compiler:
    def __init__(self, definitions: Mapping[str, Any], *, strict: bool) -> None:
        self._definitions = definitions
        self._strict = strict
        self._done: dict[str, Check] = {}
        self._started: set[str] = set()

    def node(self, node: Any) -> Check:
        """The check of a schema node, by the first of its keys: ref, fields, map, list, enum."""
        if type(node) is str:
            return _scalar(node)
        if "ref" in node:
            return self._ref(node["ref"])
        if "fields" in node:
            return self._object(node)
        if "map" in node:
            return _map(self.node(node["map"]))
        if "list" in node:
            return _list(self.node(node["list"]), empty=self._is_object(node["list"]))
        if "enum" in node:
            return _enum(tuple(node["enum"]))
        return _any

    def _is_object(self, node: Any) -> bool:
        while type(node) is dict and "ref" in node:
            node = self._definitions[node["ref"]]
        return type(node) is dict and "fields" in node

    def _ref(self, name: str) -> Check:
        found = self._done.get(name)
        if found is not None:
            return found
        if name in self._started:  # a recursive definition: look it up when called, once it is compiled
            done = self._done
            return lambda value, path, problems: done[name](value, path, problems)
        self._started.add(name)
        found = self._done[name] = self.node(self._definitions[name])
        return found

    def _object(self, node: Mapping[str, Any]) -> Check:
        fields = {key: self.node(sub) for key, sub in node["fields"].items()}
        required = tuple(node["required"]) if self._strict else ()
        strict = self._strict

        def check(value: Any, path: str, problems: Problems) -> Any:
            if type(value) is not dict:
                answer = _non_dict(value, path, problems)
                if answer is not _OTHER_MAPPING:
                    return answer
            read: dict[Any, Any] | None = None  # a copy, made at the first change
            refused: list[Any] = []  # unknown fields, left out of a copy
            for key, item in value.items():
                sub = fields.get(key)
                if sub is None:
                    if strict:
                        if problems is None:
                            return FAIL  # an unknown field, null or not
                        close = difflib.get_close_matches(str(key), fields, n=1)
                        hint = f' (did you mean "{close[0]}"?)' if close else ""
                        problems.append(errors.Problem(validator.child(path, str(key)), f"unknown field{hint}"))
                        refused.append(key)
                    if item is None:
                        read = read if read is not None else dict(value)
                        del read[key]
                    continue  # a field of a newer version: kept as it is
                if item is None:
                    read = read if read is not None else dict(value)
                    del read[key]
                    continue
                if sub is _string and isinstance(item, str):  # most fields: checked here, without a call
                    continue
                out = sub(item, path if problems is None else f"{path}.{key}" if path else key, problems)
                if out is not item:
                    if out is FAIL:
                        return FAIL
                    read = read if read is not None else dict(value)
                    read[key] = out
            if read is not None:
                for key in refused:
                    read.pop(key, None)
            result = value if read is None else read
            for key in required:
                if result.get(key) is None:
                    if problems is None:
                        return FAIL
                    problems.append(errors.Problem(validator.child(path, key), "Required value"))
            return result

        return check


_OTHER_MAPPING: Final = object()


def _non_dict(value: Any, path: str, problems: Problems) -> Any:
    """What an object or map check answers for a value that is not a dict: FAIL on the fast path (no `problems`), the
    value with a problem when it is no mapping at all, `_OTHER_MAPPING` for another Mapping, read as a dict is."""
    if problems is None:
        return FAIL
    if not isinstance(value, Mapping):
        problems.append(errors.Problem(path, f"must be an object, got {validator.type_name(value)}"))
        return value
    return _OTHER_MAPPING


def _map(item_check: Check) -> Check:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if type(value) is not dict:
            answer = _non_dict(value, path, problems)
            if answer is not _OTHER_MAPPING:
                return answer
        read: dict[Any, Any] | None = None
        for key, item in value.items():
            if item is None:
                read = read if read is not None else dict(value)
                del read[key]
                continue
            out = item_check(item, path if problems is None else f"{path}[{key}]", problems)
            if out is not item:
                if out is FAIL:
                    return FAIL
                read = read if read is not None else dict(value)
                read[key] = out
        return value if read is None else read

    return check


def _list(item_check: Check, *, empty: bool) -> Check:
    """`empty`: a null item reads as an empty object (the item type's zero value, which may miss a required field);
    otherwise as null, which only a scalar type accepts."""

    def check(value: Any, path: str, problems: Problems) -> Any:
        if type(value) is not list:
            if problems is None:
                return FAIL
            problems.append(errors.Problem(path, f"must be a list, got {validator.type_name(value)}"))
            return value
        read: list[Any] | None = None
        for i, item in enumerate(value):
            if item is None:
                if problems is None:
                    return FAIL  # read as the item type's zero value: the second reading checks it
                item = {} if empty else None
            out = item_check(item, path if problems is None else validator.index(path, i), problems)
            if out is not value[i]:
                if out is FAIL:
                    return FAIL
                read = read if read is not None else list(value)
                read[i] = out
        return value if read is None else read

    return check


def _enum(allowed: tuple[Any, ...]) -> Check:
    supported = ", ".join(f'"{v}"' for v in allowed)

    def check(value: Any, path: str, problems: Problems) -> Any:
        if value in allowed:
            return value
        return _refuse(value, path, problems, f"unsupported value {show(value)} (supported: {supported})")

    return check


def _refuse(value: Any, path: str, problems: Problems, message: str) -> Any:
    """A scalar's problem: `FAIL` without a sink; with one, recorded, and the value read as it is."""
    if problems is None:
        return FAIL
    problems.append(errors.Problem(path, message))
    return value


def _any(value: Any, path: str, problems: Problems) -> Any:
    return value


# A scalar check tests the common case first; the rest runs only for a value that fails it, which with a sink may
# still be fine (a null list item, an int subclass), or a problem to say.


def _string(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, str) or (value is None and problems is not None):
        return value
    return _refuse(value, path, problems, f"must be a string, got {validator.type_name(value)}")


def _boolean(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, bool) or (value is None and problems is not None):
        return value
    return _refuse(value, path, problems, f"must be a boolean, got {validator.type_name(value)}")


def _integer(kind: str) -> Check:
    bound = _INT_RANGES[kind]

    def check(value: Any, path: str, problems: Problems) -> Any:
        if type(value) is int and -bound <= value < bound:
            return value
        if problems is None:
            return FAIL
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            return _refuse(value, path, problems, f"must be an integer, got {validator.type_name(value)}")
        if not -bound <= value < bound:
            return _refuse(value, path, problems, f"must fit in {_INT_NAMES[kind]}, got {show(value)}")
        return value

    return check


_INT_NAMES: Final = {"int32": "int32", "int64": "int64", "integer": "int64"}


def _number(value: Any, path: str, problems: Problems) -> Any:
    if type(value) is int or type(value) is float or (value is None and problems is not None):
        return value
    if problems is not None and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return _refuse(value, path, problems, f"must be a number, got {validator.type_name(value)}")


def _quantity(value: Any, path: str, problems: Problems) -> Any:
    if value is None and problems is not None:
        return value
    try:
        quantity.parse(value)
    except quantity.QuantityError as exc:
        return _refuse(value, path, problems, str(exc))
    return value


def _int_or_string(value: Any, path: str, problems: Problems) -> Any:
    if type(value) is int or isinstance(value, str) or (value is None and problems is not None):
        return value
    if problems is not None and isinstance(value, int) and not isinstance(value, bool):
        return value
    return _refuse(value, path, problems, f"must be an integer or a string, got {validator.type_name(value)}")


def _date_time(value: Any, path: str, problems: Problems) -> Any:
    if (isinstance(value, str) and _is_timestamp(value)) or (value is None and problems is not None):
        return value
    return _refuse(value, path, problems, f"must be an RFC 3339 timestamp, got {show(value)}")


@functools.lru_cache(maxsize=4096)
def _is_timestamp(text: str) -> bool:
    """An object's timestamps repeat (its conditions change together, with its start), and so do those of objects
    made together: a pod's half-dozen took a third of checking it."""
    try:
        decoding.timestamp(text)
    except (ValueError, OverflowError):
        return False
    return True


def _scalar(kind: str) -> Check:
    """A kind not known here (and `any`) accepts everything."""
    if kind in _INT_RANGES:
        return _integer(kind)
    checks: dict[str, Check] = {
        "string": _string,
        "boolean": _boolean,
        "number": _number,
        "quantity": _quantity,
        "int-or-string": _int_or_string,
        "date-time": _date_time,
    }
    return checks.get(kind, _any)


def show(value: Any, limit: int = 60) -> str:
    """A value for a message: short, and safe for integers of any length."""
    if isinstance(value, str):
        text = f'"{value}"'
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        text = f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    elif isinstance(value, bool | int | float):
        text = str(value).lower() if isinstance(value, bool) else str(value)
    else:
        text = validator.type_name(value)
    return text if len(text) <= limit else f"{text[:limit]}..."
