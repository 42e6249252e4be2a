"""A compiled CRD check gives the same reading with and without a problem sink: without one (the fast answer) it
accepts exactly what has no problem, but values of unusual Python types, and returns the same defaulted value;
with one it names every problem."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders, hypothesis_profiles, mutations
from tests.api import test_schema_agreement

from karpy.api import parse, validator
from karpy_emulator import dumps

KINDS = ("NodePool", "NodeClaim", "EC2NodeClass", "NodeOverlay")
OVERLAY = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "cheaper"},
    "spec": {
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        "priceAdjustment": "-10%",
        "capacity": {"hugepages-2Mi": "100Mi"},
        "weight": 10,
    },
}
DUMPED = [o for o in dumps.objects(dumps.Shape(nodes=2, pending=1, guarded_every=2)) if o["kind"] in KINDS]
SEEDS = [
    *DUMPED,
    OVERLAY,
    builders.nodepool(),
    builders.ec2nodeclass(),
    *(m for _, m in test_schema_agreement.CASES),
    *(m for _, m in test_schema_agreement.RUNTIME_ONLY),
]
WRONG_VALUES = st.sampled_from(
    [None, 0, -1, 2**40, 1.5, True, "x", "", "720h", "Never", [], [None], ["x"], {}, {"a": None}, {"a": 1}, ("t",)]
)


def _body(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "metadata"}  # what `parse` validates


def _read(obj: dict[str, Any]) -> tuple[Any, list[Any]]:
    return validator.validate_with(parse._schema(obj["kind"]))(copy.deepcopy(_body(obj)))


def _exotic(value: Any) -> bool:
    """A value the compiled check may leave to the walker though it is valid: a tuple, a key that is no `str`."""
    if isinstance(value, tuple):
        return True
    if isinstance(value, dict):
        return any(type(k) is not str or _exotic(v) for k, v in value.items())
    return isinstance(value, list) and any(_exotic(v) for v in value)


def _agrees(schema: Any, value: Any) -> bool:
    """The fast answer accepts what the reading with a sink finds no problem in (but exotic values) and returns
    what it returns; and it refuses what that reading finds a problem in. Whether it accepted."""
    check = validator.compile_schema(schema)
    fast = check(copy.deepcopy(value), "", None)
    problems: list[Any] = []
    read = check(copy.deepcopy(value), "", problems)
    assert read is not validator.FAIL, "a reading with a sink always ends"
    assert validator.validate(copy.deepcopy(value), schema) == (read, problems)
    if fast is validator.FAIL:
        assert problems or _exotic(value), "a valid value refused by the fast answer"
        return False
    assert problems == []
    assert fast == read
    return True


def test_the_seeds_cover_every_kind_and_both_verdicts() -> None:
    assert {o["kind"] for o in SEEDS} == set(KINDS)
    verdicts = {not _read(o)[1] for o in SEEDS}
    assert verdicts == {True, False}


@pytest.mark.parametrize("obj", SEEDS, ids=[f"{i}-{o['kind']}" for i, o in enumerate(SEEDS)])
def test_the_seeds_read_the_same_with_and_without_a_sink(obj: dict[str, Any]) -> None:
    _agrees(parse._schema(obj["kind"]), _body(obj))


@st.composite
def mutants(draw: st.DrawFn) -> dict[str, Any]:
    obj = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(mutations.positions(obj)))
        if path[0] in ("apiVersion", "kind", "metadata"):
            continue
        parent, last = mutations.parent_of(obj, path), path[-1]
        action = draw(st.sampled_from(["retype", "rename", "delete", "add", "repeat"]))
        if action == "retype":
            parent[last] = copy.deepcopy(draw(WRONG_VALUES))
        elif action == "rename" and isinstance(last, str):
            parent[last[:-1] + draw(st.sampled_from(["s", "x", "", "S"]))] = parent.pop(last)
        elif action == "delete":
            del parent[last]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["weight", "requirement", "values", "spec", "x"]))] = draw(WRONG_VALUES)
        elif action == "repeat" and isinstance(parent, list):  # a duplicate in a list-type set or map
            parent.append(copy.deepcopy(parent[last]))
    return obj


@given(mutants())
@settings(
    max_examples=hypothesis_profiles.examples(400),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_mutants_read_the_same_with_and_without_a_sink(obj: dict[str, Any]) -> None:
    _agrees(parse._schema(obj["kind"]), _body(obj))


OBJECT = {"type": "object", "properties": {"a": {"type": "string", "default": "d"}}}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        (OBJECT, {"a": None}, True),  # a null is pruned, then defaulted
        (OBJECT, {"b": "x"}, False),
        (OBJECT | {"required": ["a"]}, {}, True),
        (OBJECT | {"required": ["b"]}, {}, False),
        ({"type": "object", "properties": {"a": {"type": "object", "default": {"b": 1}}}}, {}, True),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": None, "b": 2}, True),
        ({"type": "object", "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True}}, {"a": None}, True),
        ({"type": "object"}, {"a": {"b": [None]}}, True),
        (STRINGS, {1: "x"}, False),
        (STRINGS | {"maxProperties": 1}, {"a": "x", "b": "y"}, False),
        (STRINGS | {"maxProperties": 1}, {"a": "x", "b": None}, True),
        ({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}, ["a", "a"], False),
        ({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}, ["a", "b"], True),
        (
            {"type": "array", "items": {}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]},
            [{"k": 1}, {"k": 1.0}, {"k": "1"}],
            True,
        ),
        ({"type": "array", "items": {"type": "string"}}, ("a",), True),  # valid, and left to the walker
        ({"type": "array", "items": {}, "maxItems": 1}, [1, [2]], False),
        ({"type": "array", "items": {}, "minItems": 1}, [], False),
        ({"type": "integer", "format": "int32"}, 2**31, False),
        ({"type": "integer", "format": "int64"}, 2**31, True),
        ({"type": "integer", "minimum": 0}, True, False),
        ({"type": "number", "maximum": 1}, 1.5, False),
        ({"type": "number", "minimum": 1}, 1.5, True),
        ({"type": "string", "format": "date-time"}, "2027-01-15", False),
        ({"type": "string", "format": "date-time"}, "2027-01-15T08:00:00Z", True),
        ({"type": "string", "pattern": "[0-9]+"}, "a1b", True),  # found anywhere, as Go's MatchString finds it
        ({"type": "string", "pattern": "^[0-9]+$"}, "a1b", False),
        ({"type": "string", "maxLength": 2}, "abc", False),
        ({"type": "string", "minLength": 2}, "a", False),
        ({"type": "string", "enum": ["a"]}, "b", False),
        ({"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+$"}, "12", True),
        ({"x-kubernetes-int-or-string": True}, 1.0, False),
        ({"x-kubernetes-int-or-string": True}, True, False),
        ({}, None, True),
        ({}, {"a": [{"b": None}]}, True),
    ],
)
def test_each_keyword_reads_the_same_with_and_without_a_sink(schema: dict[str, Any], value: Any, valid: bool) -> None:
    assert validator.validate_with(schema)(value) == validator.validate(value, schema)
    assert _agrees(schema, value) == (valid and not _exotic(value))
    assert (validator.validate(value, schema)[1] == []) == valid


def test_what_is_read_shares_nothing_mutable_with_the_value_or_the_schema() -> None:
    default = {"b": [1]}
    schema = {"type": "object", "properties": {"a": {"default": default}, "c": {"type": "object"}}}
    value = {"c": {"d": [1]}}
    read, _ = validator.validate_with(schema)(value)
    read["a"]["b"].append(2)
    read["c"]["d"].append(2)
    assert default == {"b": [1]}
    assert value == {"c": {"d": [1]}}


def test_a_dumped_cluster_is_read_by_the_fast_answer_alone() -> None:
    """The Karpenter objects a cluster holds are read without a sink: formatting paths and messages for them was most
    of what parsing a NodeClaim cost."""
    for obj in [*DUMPED, OVERLAY]:
        assert validator.compile_schema(parse._schema(obj["kind"]))(_body(obj), "", None) is not validator.FAIL
