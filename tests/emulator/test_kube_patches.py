"""Patch formats: RFC 7386 merge, RFC 6902 JSON patch and strategic merge, as tables plus Hypothesis laws."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import json_strategies

from karpy_emulator.apiserver import patches

DOC = {"metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x/one"]}, "spec": {"list": [1, 2]}}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {"metadata": {"labels": {"b": "2"}}},
            {**DOC, "metadata": {**DOC["metadata"], "labels": {"a": "1", "b": "2"}}},
        ),
        ({"metadata": {"labels": None}}, {**DOC, "metadata": {"name": "p", "finalizers": ["x/one"]}}),
        ({"spec": {"list": [3]}}, {**DOC, "spec": {"list": [3]}}),  # lists are replaced
    ],
)
def test_merge_patch(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(DOC)
    assert patches.merge_patch(DOC, patch) == expected
    assert before == DOC  # inputs are never mutated


@pytest.mark.parametrize(
    ("ops", "path", "expected"),
    [
        ([{"op": "add", "path": "/spec/list/-", "value": 3}], ("spec", "list"), [1, 2, 3]),
        ([{"op": "add", "path": "/spec/list/0", "value": 0}], ("spec", "list"), [0, 1, 2]),
        ([{"op": "remove", "path": "/spec/list/0"}], ("spec", "list"), [2]),
        ([{"op": "replace", "path": "/metadata/labels/a", "value": "9"}], ("metadata", "labels"), {"a": "9"}),
        (
            [{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/b"}],
            ("metadata", "labels"),
            {"b": "1"},
        ),
        ([{"op": "copy", "from": "/spec/list", "path": "/spec/copy"}], ("spec", "copy"), [1, 2]),
        (
            [{"op": "add", "path": "/metadata/labels/a~1b", "value": "s"}],
            ("metadata", "labels"),
            {"a": "1", "a/b": "s"},
        ),
        ([{"op": "test", "path": "/metadata/name", "value": "p"}], ("metadata", "name"), "p"),
    ],
)
def test_json_patch(ops: list[dict[str, Any]], path: tuple[str, ...], expected: Any) -> None:
    result = patches.json_patch(DOC, ops)
    for part in path:
        result = result[part]
    assert result == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"}],
        [{"op": "remove", "path": "/metadata/missing"}],
        [{"op": "replace", "path": "/spec/list/5", "value": 1}],
        [{"op": "frobnicate", "path": "/spec"}],
        {"op": "add", "path": "/x", "value": 1},
    ],
)
def test_json_patch_failures(ops: Any) -> None:
    with pytest.raises(patches.PatchError):
        patches.json_patch(DOC, ops)


def test_json_patch_test_of_a_missing_member_against_null_passes() -> None:
    """Kopf tests `resourceVersion == None` when it never saw one."""
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": None}]
    assert patches.json_patch(DOC, ops) == DOC


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        (
            {"metadata": {"finalizers": ["a"]}},
            {"metadata": {"finalizers": ["b", "a"]}},
            {"metadata": {"finalizers": ["a", "b"]}},
        ),
        (
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            {"metadata": {"finalizers": ["b"]}},
        ),
        (
            {"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}]}},
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]}},
        ),
        (
            {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}},
            {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}},
            {"spec": {"containers": [{"name": "b", "image": "1"}]}},
        ),
        (
            {"spec": {"taints": [{"key": "a"}]}},
            {"spec": {"taints": [{"key": "b"}]}},
            {"spec": {"taints": [{"key": "b"}]}},
        ),
        ({"spec": {"x": {"a": 1}}}, {"spec": {"x": {"$patch": "replace", "b": 2}}}, {"spec": {"x": {"b": 2}}}),
        ({"metadata": {"labels": {"a": "1"}}}, {"metadata": {"labels": {"a": None}}}, {"metadata": {"labels": {}}}),
    ],
)
def test_strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert patches.strategic_merge_patch(target, patch) == expected


JSON = json_strategies.trees(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5), keys=st.text(max_size=3), max_leaves=10
)
OBJECTS = json_strategies.objects(JSON, keys=st.text(max_size=3))


@given(OBJECTS, OBJECTS)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = patches.merge_patch(target, patch)
    assert patches.merge_patch(once, patch) == once


@given(OBJECTS)
def test_empty_patches_change_nothing(target: dict[str, Any]) -> None:
    assert patches.merge_patch(target, {}) == target
    assert patches.json_patch(target, []) == target
    assert patches.strategic_merge_patch(target, {}) == target
