"""Strict structural reading of the Kubernetes core kinds `karpy simulate` accepts, as `kubectl --validate=strict`.

The structure comes from the API server's OpenAPI (Kubernetes v1.35, strict), turned into `corekinds.json` by
tools/gen_core_schemas.py: every field each kind has, its type, and the fields a type requires. `read` refuses
what the API server's strict decoding refuses — a wrong or missing `apiVersion`, an unknown (or misspelled) field,
a value of the wrong type, an integer outside its int32/int64 range, a quantity or timestamp that does not parse,
a required field left out — and lists every problem with its field path. `null` reads as absent, as the API
server's decoder reads it. A valid object is read by the checks `corecheck` compiles from the same structure;
the walker here reads again only an object they refuse, to name every problem. Semantics beyond structure
(non-negative requests, selectors that match) are `corerules`'. Nothing here raises on bad input.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
import json
import math
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any, Final

from karpy.api import corecheck, decoding, errors, quantity, validator

_INT_RANGES: Final = {"int32": 2**31, "int64": 2**63, "integer": 2**63}
_SCALAR_TYPES: Final = {"string": str, "boolean": bool}


@functools.cache
def _schemas() -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(importlib.resources.files(__package__).joinpath("corekinds.json").read_text())
    return data


@functools.cache
def _checks(strict: bool) -> Mapping[str, corecheck.Check]:
    return corecheck.compile_kinds(_schemas()["definitions"], _schemas()["kinds"], strict=strict)


@functools.cache
def api_versions() -> Mapping[str, str]:
    """kind -> the apiVersion it must be read with (`Pod` -> `v1`, `Deployment` -> `apps/v1`)."""
    return MappingProxyType({key.rsplit("/", 1)[1]: key.rsplit("/", 1)[0] for key in _schemas()["kinds"]})


def read(
    obj: Mapping[str, Any],
    kind: str,
    *,
    fields: Collection[str] | None = None,
    strict: bool = True,
    compiled: bool = True,
) -> tuple[dict[str, Any], list[errors.Problem]]:
    """`obj` read as `kind` (one of `api_versions()`): the object as the API server would store it (a `null` field
    is absent, a `null` list item of an object type is empty) and every structural problem. With `fields`, only
    those top-level fields are read (the caller knows the others); the rest are returned as they are.

    `strict=False` reads an object the API server already holds, as a client of any version must: fields it does
    not know (a newer Kubernetes) and a missing apiVersion (LIST items carry none) are fine; only values of the
    wrong type, which no reader can use, are problems.

    `compiled=False` walks the object with the reference walker only (`corecheck` must agree with it: tests)."""
    expected = api_versions()[kind]
    problems: list[errors.Problem] = []
    api_version = obj.get("apiVersion")
    if not strict:
        pass
    elif api_version is None:
        problems.append(errors.Problem("apiVersion", f'Required value: must be "{expected}" for a {kind}'))
    elif api_version != expected:
        problems.append(errors.Problem("apiVersion", f'must be "{expected}" for a {kind}, got {_show(api_version)}'))
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind") and (fields is None or k in fields)}
    name = f"{expected}/{kind}"
    read: Any = _checks(strict)[name](body) if compiled else corecheck.FAIL
    if read is corecheck.FAIL:  # something is wrong (or not looked for): the walker says what, and where
        read = _Walker(_schemas()["definitions"], problems, strict=strict).walk(body, _schemas()["kinds"][name], "")
    rest = {k: v for k, v in obj.items() if fields is not None and k not in fields and k not in ("apiVersion", "kind")}
    head = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    if strict and "kind" in obj and obj["kind"] != kind:
        problems.append(errors.Problem("kind", f'must be "{kind}", got {_show(obj["kind"])}'))
    return {**head, **rest, **read}, problems


class _Walker:
    """Checks a value against a node and returns it without nulls (the same object when it had none)."""

    def __init__(self, definitions: Mapping[str, Any], problems: list[errors.Problem], *, strict: bool) -> None:
        self._definitions = definitions
        self._problems = problems
        self._strict = strict

    def _fail(self, path: str, message: str) -> None:
        self._problems.append(errors.Problem(path, message))

    def _resolve(self, node: Any) -> Any:
        while type(node) is dict and "ref" in node:
            node = self._definitions[node["ref"]]
        return node

    def walk(self, value: Any, node: Any, path: str) -> Any:
        node = self._resolve(node)
        if type(node) is str:
            self._scalar(value, node, path)
        elif "fields" in node:
            return self._object(value, node, path)
        elif "map" in node:
            if not isinstance(value, Mapping):
                self._fail(path, f"must be an object, got {validator.type_name(value)}")
                return value
            item = node["map"]
            return self._entries(value, lambda key: item, path, index=True)
        elif "list" in node:
            if type(value) is not list:
                self._fail(path, f"must be a list, got {validator.type_name(value)}")
                return value
            return self._items(value, node["list"], path)
        elif "enum" in node and value not in node["enum"]:
            allowed = ", ".join(f'"{v}"' for v in node["enum"])
            self._fail(path, f"unsupported value {_show(value)} (supported: {allowed})")
        return value

    def _items(self, value: list[Any], node: Any, path: str) -> list[Any]:
        resolved = self._resolve(node)
        empty: Any = {} if type(resolved) is dict and "fields" in resolved else None
        read = [
            self.walk(empty if item is None else item, node, validator.index(path, i)) for i, item in enumerate(value)
        ]
        return value if all(a is b for a, b in zip(read, value, strict=True)) else read

    def _entries(
        self, value: Mapping[str, Any], node_of: Callable[[str], Any], path: str, *, index: bool
    ) -> Mapping[str, Any]:
        """Each entry walked with the node `node_of` gives it (None: refused, already reported), nulls dropped."""
        changed = False
        read: dict[str, Any] = {}
        for key, item in value.items():
            node = node_of(key)  # first: an unknown field is refused even when null
            if item is None:
                changed = True
                continue
            if node is None:
                if not self._strict:  # a field of a newer version: kept as it is
                    read[key] = item
                continue
            read[key] = walked = self.walk(item, node, f"{path}[{key}]" if index else f"{path}.{key}" if path else key)
            changed = changed or walked is not item
        return read if changed else value

    def _object(self, value: Any, node: Mapping[str, Any], path: str) -> Any:
        if not isinstance(value, Mapping):
            self._fail(path, f"must be an object, got {validator.type_name(value)}")
            return value
        fields: Mapping[str, Any] = node["fields"]

        def node_of(key: str) -> Any:
            found = fields.get(key)
            if found is None and self._strict:
                close = difflib.get_close_matches(str(key), fields, n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                self._fail(validator.child(path, str(key)), f"unknown field{hint}")
            return found

        read = self._entries(value, node_of, path, index=False)
        for key in node["required"] if self._strict else ():
            if read.get(key) is None:
                self._fail(validator.child(path, key), "Required value")
        return read

    def _scalar(self, value: Any, kind: str, path: str) -> None:
        if kind == "any" or value is None:
            return
        if kind in _SCALAR_TYPES:
            if not isinstance(value, _SCALAR_TYPES[kind]):
                self._fail(path, f"must be a {kind}, got {validator.type_name(value)}")
        elif kind in _INT_RANGES:
            bound = _INT_RANGES[kind]
            if isinstance(value, bool) or not isinstance(value, int):
                self._fail(path, f"must be an integer, got {validator.type_name(value)}")
            elif not -bound <= value < bound:
                self._fail(path, f"must fit in {kind if kind != 'integer' else 'int64'}, got {_show(value)}")
        elif kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                self._fail(path, f"must be a number, got {validator.type_name(value)}")
        elif kind == "quantity":
            try:
                quantity.parse(value)
            except quantity.QuantityError as exc:
                self._fail(path, str(exc))
        elif kind == "int-or-string":
            if isinstance(value, bool) or not isinstance(value, int | str):
                self._fail(path, f"must be an integer or a string, got {validator.type_name(value)}")
        elif kind == "date-time" and (not isinstance(value, str) or not _is_timestamp(value)):
            self._fail(path, f"must be an RFC 3339 timestamp, got {_show(value)}")


def _is_timestamp(text: str) -> bool:
    try:
        decoding.timestamp(text)
    except (ValueError, OverflowError):
        return False
    return True


def _show(value: Any, limit: int = 60) -> str:
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
