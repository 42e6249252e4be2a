"""NodePool/EC2NodeClass status and hash patches (pure): condition tables, transition times, no-op detection."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests import builders

from karpy.api import ec2nodeclass, hashing, labels, meta, parse
from karpy.operator import poolstatus

NOW = 1_700_000_000.0
GiB = 1024**3 * 1000


def nodeclass(ready: str | None) -> ec2nodeclass.EC2NodeClass:
    raw: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default", "generation": 3},
        "spec": {
            "role": "r",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
        },
    }
    if ready is not None:
        raw["status"] = {"conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "why",
                                         "lastTransitionTime": "2023-11-14T22:13:20Z"}]}  # fmt: skip
    return parse.ec2nodeclass(raw)


POOL = parse.nodepool(builders.nodepool("good"))


@pytest.mark.parametrize(
    ("nc_ready", "error", "expected"),
    [
        # (NodeClass Ready, validation error) -> (ValidationSucceeded, NodeClassReady, Ready)
        ("True", "", ("True", "True", "True")),
        ("False", "", ("True", "False", "False")),
        (None, "", ("True", "Unknown", "False")),
        ("missing", "", ("True", "False", "False")),
        ("True", "spec.weight: too big", ("False", "Unknown", "False")),
    ],
)
def test_condition_table(nc_ready: str | None, error: str, expected: tuple[str, str, str]) -> None:
    classes = {} if nc_ready == "missing" else {"default": nodeclass(nc_ready)}
    conds = poolstatus.nodepool_conditions(
        (), pool=None if error else POOL, validation_error=error, nodeclasses=classes, now=NOW
    )
    got = tuple(meta.condition(conds, t).status for t in ("ValidationSucceeded", "NodeClassReady", "Ready"))  # type: ignore[union-attr]
    assert got == expected


def test_reasons_and_messages_name_the_problem() -> None:
    conds = poolstatus.nodepool_conditions((), pool=POOL, validation_error="", nodeclasses={}, now=NOW)
    nc = meta.condition(conds, "NodeClassReady")
    ready = meta.condition(conds, "Ready")
    assert nc is not None
    assert ready is not None
    assert nc.reason == "NodeClassNotFound"
    assert "'default'" in nc.message
    assert ready.reason == "UnhealthyDependents"
    assert "NodeClassReady=False" in ready.message
    invalid = poolstatus.nodepool_conditions((), pool=None, validation_error="spec.weight: x", nodeclasses={}, now=NOW)
    failed = meta.condition(invalid, "ValidationSucceeded")
    assert failed is not None
    assert (failed.reason, failed.message) == ("NodePoolValidationFailed", "spec.weight: x")


def test_transition_time_moves_only_when_status_changes() -> None:
    classes = {"default": nodeclass("True")}
    first = poolstatus.nodepool_conditions((), pool=POOL, validation_error="", nodeclasses=classes, now=NOW)
    same = poolstatus.nodepool_conditions(first, pool=POOL, validation_error="", nodeclasses=classes, now=NOW + 60)
    assert meta.condition(same, "Ready") == meta.condition(first, "Ready")
    flipped = poolstatus.nodepool_conditions(same, pool=POOL, validation_error="", nodeclasses={}, now=NOW + 120)
    ready = meta.condition(flipped, "Ready")
    assert ready is not None
    assert ready.last_transition_time == NOW + 120


def test_status_patch_carries_usage_and_is_none_once_written() -> None:
    raw = builders.nodepool("good")
    usage = {"cpu": 4000, "memory": 16 * GiB, "nodes": 2000}
    classes = {"default": nodeclass("True")}
    patch = poolstatus.nodepool_status_patch(raw, pool=POOL, validation_error="", nodeclasses=classes, usage=usage,
                                             now=NOW)  # fmt: skip
    assert patch is not None
    body = patch["status"]
    assert body["resources"] == {"cpu": "4", "memory": "16Gi"}  # "nodes" is a count, not a resource
    assert body["nodes"] == 2
    assert body["nodeClassObservedGeneration"] == 3
    written = {**copy.deepcopy(raw), "status": body}
    again = poolstatus.nodepool_status_patch(written, pool=POOL, validation_error="", nodeclasses=classes, usage=usage,
                                             now=NOW + 30)  # fmt: skip
    assert again is None


def test_hash_patch_until_annotated() -> None:
    patch = poolstatus.nodepool_hash_patch(POOL)
    assert patch == {
        "metadata": {
            "annotations": {
                labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(POOL),
                labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
            }
        }
    }
    raw = builders.nodepool("good")
    raw["metadata"]["annotations"] = patch["metadata"]["annotations"]
    assert poolstatus.nodepool_hash_patch(parse.nodepool(raw)) is None


@pytest.mark.parametrize(
    ("finalizers", "add", "remove", "expected"),
    [
        ([], "f", "", ["f"]),
        (["other"], "f", "", ["other", "f"]),
        (["f"], "f", "", None),
        (["other", "f"], "", "f", ["other"]),
        (["other"], "", "f", None),
    ],
)
def test_finalizers_patch(finalizers: list[str], add: str, remove: str, expected: list[str] | None) -> None:
    raw = {"metadata": {"name": "x", "resourceVersion": "7", "finalizers": finalizers}}
    patch = poolstatus.finalizers_patch(raw, add=add, remove=remove)
    if expected is None:
        assert patch is None
    else:
        assert patch == [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/metadata/finalizers", "value": expected},
        ]
