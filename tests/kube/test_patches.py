"""`merge_diff`: the merge patch of only what changed (controller-runtime's `client.MergeFrom(stored)`), as a table
and a Hypothesis law: applied to `before`, it gives `after`."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import json_strategies

from karpy.kube import patches

STATUS = {
    "providerID": "aws:///us-west-2a/i-1",
    "lastPodEventTime": "2023-11-14T22:13:20Z",
    "capacity": {"cpu": "2", "memory": "4Gi"},
    "conditions": [{"type": "Launched", "status": "True"}],
}
TWO = [{"type": "Launched", "status": "True"}, {"type": "Registered", "status": "True"}]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (STATUS, {}),
        ({**STATUS, "nodeName": "n1"}, {"nodeName": "n1"}),  # added
        ({k: v for k, v in STATUS.items() if k != "providerID"}, {"providerID": None}),  # removed
        ({**STATUS, "capacity": {"cpu": "2", "memory": "8Gi"}}, {"capacity": {"memory": "8Gi"}}),  # maps recurse
        ({**STATUS, "conditions": TWO}, {"conditions": TWO}),  # lists go whole, as a merge patch replaces them
    ],
)
def test_merge_diff_holds_only_what_changed(after: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(STATUS)
    assert patches.merge_diff(STATUS, after) == expected
    assert before == STATUS  # inputs are never mutated


# No null leaves: a merge patch's null deletes a key, so no diff can give back a document holding one.
_KEYS = st.text(max_size=2)
_DOCS = json_strategies.objects(
    json_strategies.trees(st.booleans() | st.integers() | st.text(max_size=3), keys=_KEYS), keys=_KEYS
)


@given(_DOCS, _DOCS)
def test_merge_diff_applied_to_before_gives_after(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert patches.merge_patch(before, patches.merge_diff(before, after)) == after
