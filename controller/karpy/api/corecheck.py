"""`corekinds`' structural check compiled once per schema into closures: the fast path of `corekinds.read`.

A compiled check returns what `corekinds`' walker returns for a value in which it finds no problem (the value
without its nulls: the same object when it had none), or `FAIL` as soon as anything is off, without saying what;
`corekinds.read` then walks the object again to report every problem with its field path. The objects a cluster
holds are almost always valid, and the state cache reads every pod and node it is told of: walking each one with
paths and messages at the ready was most of the time it took to build the model of a 5,000-node cluster
(bench/explain.py). A check may refuse more than the walker (a `str` subclass, a mapping that is not a dict, a null
list item): that object only takes the walker's slower path. It must never accept what the walker refuses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

from karpy.api import decoding, quantity

Check = Callable[[Any], Any]


class _Fail:
    __slots__ = ()

    def __repr__(self) -> str:
        return "FAIL"


FAIL: Final = _Fail()
"""What a check returns for a value with any problem."""

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
        """The check of a schema node; the walker's dispatch, in its order."""
        if type(node) is str:
            return _scalar(node)
        if "ref" in node:
            return self._ref(node["ref"])
        if "fields" in node:
            return self._object(node)
        if "map" in node:
            return _map(self.node(node["map"]))
        if "list" in node:
            return _list(self.node(node["list"]))
        if "enum" in node:
            return _enum(tuple(node["enum"]))
        return _any

    def _ref(self, name: str) -> Check:
        found = self._done.get(name)
        if found is not None:
            return found
        if name in self._started:  # a recursive definition: look it up when called, once it is compiled
            done = self._done
            return lambda value: done[name](value)
        self._started.add(name)
        found = self._done[name] = self.node(self._definitions[name])
        return found

    def _object(self, node: Mapping[str, Any]) -> Check:
        fields = {key: self.node(sub) for key, sub in node["fields"].items()}
        required = tuple(node["required"]) if self._strict else ()
        strict = self._strict

        def check(value: Any) -> Any:
            if type(value) is not dict:
                return FAIL
            read: dict[Any, Any] | None = None  # a copy, made at the first change
            for key, item in value.items():
                sub = fields.get(key)
                if sub is None:
                    if strict:
                        return FAIL  # an unknown field, null or not
                    if item is None:
                        read = read if read is not None else dict(value)
                        del read[key]
                    continue  # a field of a newer version: kept as it is
                if item is None:
                    read = read if read is not None else dict(value)
                    del read[key]
                    continue
                if sub is _string:  # most fields: checked here, without a call
                    if isinstance(item, str):
                        continue
                    return FAIL
                out = sub(item)
                if out is not item:
                    if out is FAIL:
                        return FAIL
                    read = read if read is not None else dict(value)
                    read[key] = out
            result = value if read is None else read
            for key in required:
                if result.get(key) is None:
                    return FAIL
            return result

        return check


def _map(item_check: Check) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not dict:
            return FAIL
        read: dict[Any, Any] | None = None
        for key, item in value.items():
            if item is None:
                read = read if read is not None else dict(value)
                del read[key]
                continue
            out = item_check(item)
            if out is not item:
                if out is FAIL:
                    return FAIL
                read = read if read is not None else dict(value)
                read[key] = out
        return value if read is None else read

    return check


def _list(item_check: Check) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not list:
            return FAIL
        read: list[Any] | None = None
        for i, item in enumerate(value):
            if item is None:
                return FAIL  # read as the item type's zero value, which the walker checks
            out = item_check(item)
            if out is not item:
                if out is FAIL:
                    return FAIL
                read = read if read is not None else list(value)
                read[i] = out
        return value if read is None else read

    return check


def _enum(allowed: tuple[Any, ...]) -> Check:
    return lambda value: value if value in allowed else FAIL


def _any(value: Any) -> Any:
    return value


def _string(value: Any) -> Any:
    return value if isinstance(value, str) else FAIL


def _boolean(value: Any) -> Any:
    return value if isinstance(value, bool) else FAIL


def _integer(bound: int) -> Check:
    def check(value: Any) -> Any:
        if type(value) is int and -bound <= value < bound:
            return value
        return FAIL

    return check


def _number(value: Any) -> Any:
    return value if type(value) is int or type(value) is float else FAIL


def _quantity(value: Any) -> Any:
    try:
        quantity.parse(value)
    except quantity.QuantityError:
        return FAIL
    return value


def _int_or_string(value: Any) -> Any:
    return value if type(value) is int or isinstance(value, str) else FAIL


def _date_time(value: Any) -> Any:
    return value if isinstance(value, str) and _is_timestamp(value) else FAIL


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
    """The walker's `_scalar`: a kind it does not know (and `any`) accepts everything."""
    if kind in _INT_RANGES:
        return _integer(_INT_RANGES[kind])
    checks: dict[str, Check] = {
        "string": _string,
        "boolean": _boolean,
        "number": _number,
        "quantity": _quantity,
        "int-or-string": _int_or_string,
        "date-time": _date_time,
    }
    return checks.get(kind, _any)
