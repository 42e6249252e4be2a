"""CEL transition rules (those that read `oldSelf`), enforced on update as the API server enforces them.

`karpy.api.schema` pairs every other CEL rule with a Python predicate that `karpy.api.parse` runs; a transition rule
has none, because a parser sees one object. The API server evaluates a transition rule only on update, and only at
a path where both the new and the stored object have a value ("correlatable" paths: object properties and map
entries by name, items of `x-kubernetes-list-type: map` lists by their key fields; items of other lists never
correlate). This module evaluates the rule's own CEL text with cel-python, so a transition rule added to a schema
is enforced with no Python twin to keep in step. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import adapter, celtypes, evaluation

from karpy.api import validator
from karpy.api.schema import core
from karpy_emulator.apiserver import api_status

Check = Callable[[Mapping[str, Any], Mapping[str, Any] | None], Sequence[api_status.Cause]]


def _find(text: Any, pattern: Any) -> celtypes.StringType:
    """Kubernetes' CEL regex library `find`: the first match, or '' (cel-python lacks it)."""
    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _split(text: Any, separator: Any) -> celtypes.ListType:
    """Kubernetes' CEL strings library `split` (cel-python lacks it)."""
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


FUNCTIONS: Mapping[str, Callable[..., Any]] = {"find": _find, "split": _split}
"""The Kubernetes CEL library functions karpenter's rules use that cel-python does not define."""


@dataclass(frozen=True, slots=True)
class _Rule:
    rule: core.Rule
    program: celpy.Runner


@dataclass(frozen=True, slots=True)
class _Node:
    """The part of a schema that holds transition rules; subtrees without any are left out, so most of an object
    is never walked."""

    rules: tuple[_Rule, ...]
    properties: Mapping[str, _Node]
    additional: _Node | None
    items: _Node | None
    map_keys: tuple[str, ...]  # items correlate by these fields; empty: they do not correlate at all


def _compile(schema: Mapping[str, Any], env: celpy.Environment) -> _Node | None:
    rules = tuple(
        _Rule(rule, env.program(env.compile(rule.rule), functions=dict(FUNCTIONS)))
        for rule in schema.get("x-kubernetes-validations", ())
        if isinstance(rule, core.Rule) and rule.is_transition
    )
    properties = {
        name: node for name, prop in schema.get("properties", {}).items() if (node := _compile(prop, env)) is not None
    }
    additional = schema.get("additionalProperties")
    additional_node = _compile(additional, env) if isinstance(additional, Mapping) else None
    map_keys = (
        tuple(schema.get("x-kubernetes-list-map-keys", ())) if schema.get("x-kubernetes-list-type") == "map" else ()
    )
    items_node = _compile(schema["items"], env) if map_keys and "items" in schema else None
    if not (rules or properties or additional_node or items_node):
        return None
    return _Node(rules, properties, additional_node, items_node, map_keys)


VERDICTS_KEPT = 4096
"""Rule verdicts a checker remembers (the oldest is forgotten first)."""


class _Verdicts:
    """Verdicts by rule and by the exact JSON of `self` and `oldSelf`: a rule is a pure function of the two, and most
    updates leave the value a rule guards as it was (a NodeClaim's status updates leave its spec, which `self ==
    oldSelf` guards, unchanged), so CEL (about 10 ms on a NodeClaim spec in cel-python) runs once per distinct pair
    instead of on every write."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, str, str], bool] = {}

    def holds(self, rule: _Rule, new: Any, old: Any) -> bool:
        key = (id(rule), _json(new), _json(old))
        verdict = self._known.get(key)
        if verdict is None:
            verdict = self._known[key] = _holds(rule.program, new, old)
            if len(self._known) > VERDICTS_KEPT:
                del self._known[next(iter(self._known))]
        return verdict


def _json(value: Any) -> str:
    """`value` as canonical JSON: the same text for equal JSON values, and different text for 1, 1.0 and true, which
    CEL tells apart but Python's `==` does not."""
    return json.dumps(value, sort_keys=True, default=repr)


def _holds(program: celpy.Runner, new: Any, old: Any) -> bool:
    try:
        verdict = program.evaluate({"self": adapter.json_to_cel(new), "oldSelf": adapter.json_to_cel(old)})
    except evaluation.CELEvalError:
        return False  # an evaluation error refuses the update, as the API server's does
    return isinstance(verdict, celtypes.BoolType) and bool(verdict)


def _walk(node: _Node, new: Any, old: Any, path: str, causes: list[api_status.Cause], verdicts: _Verdicts) -> None:
    causes.extend(api_status.Cause(path, r.rule.message) for r in node.rules if not verdicts.holds(r, new, old))
    if isinstance(new, Mapping) and isinstance(old, Mapping):
        for name, child in node.properties.items():
            if name in new and name in old:
                _walk(child, new[name], old[name], validator.child(path, name), causes, verdicts)
        if node.additional is not None:
            for key in new.keys() & old.keys():
                _walk(node.additional, new[key], old[key], validator.index(path, key), causes, verdicts)
    elif node.items is not None and isinstance(new, list) and isinstance(old, list):
        by_key = {_map_key(item, node.map_keys): item for item in old if isinstance(item, Mapping)}
        for i, item in enumerate(new):
            before = by_key.get(_map_key(item, node.map_keys)) if isinstance(item, Mapping) else None
            if before is not None:
                _walk(node.items, item, before, validator.index(path, i), causes, verdicts)


def _map_key(item: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(repr(item.get(key)) for key in keys)


def checker(schema: core.Schema) -> Check:
    """The causes of a 422 for the transition rules of `schema` (a CRD's openAPIV3Schema): none on create."""
    root = _compile(schema, celpy.Environment())
    verdicts = _Verdicts()

    def check(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[api_status.Cause]:
        if root is None or old is None:
            return []
        causes: list[api_status.Cause] = []
        _walk(root, obj, old, "", causes, verdicts)
        return causes

    return check
