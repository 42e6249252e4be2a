"""NodePool/EC2NodeClass status and hash patches (pure): condition tables, transition times, no-op detection."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from tests import builders

from karpy.api import hashing, labels, meta, parse
from karpy.kube import patches
from karpy.nodepool import drift_hash
from karpy.nodepool import status as nodepool_status

NOW = 1_700_000_000.0
GiB = 1024**3 * 1000


parsed_nodeclass = functools.partial(builders.parsed_ec2nodeclass, generation=3)


def nodeclass_status(ready: str | None) -> dict[str, Any] | None:
    """An EC2NodeClass status whose Ready condition is `ready` (None: not reconciled yet, no status)."""
    if ready is None:
        return None
    at = "2023-11-14T22:13:20Z"
    return {"conditions": [builders.condition("Ready", ready, reason="R", message="why", lastTransitionTime=at)]}


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
    classes = {} if nc_ready == "missing" else {"default": parsed_nodeclass(status=nodeclass_status(nc_ready))}
    conds = nodepool_status.nodepool_conditions(
        (), pool=None if error else POOL, validation_error=error, nodeclasses=classes, now=NOW
    )
    got = tuple(meta.condition(conds, t).status for t in ("ValidationSucceeded", "NodeClassReady", "Ready"))  # type: ignore[union-attr]
    assert got == expected


def test_reasons_and_messages_name_the_problem() -> None:
    conds = nodepool_status.nodepool_conditions((), pool=POOL, validation_error="", nodeclasses={}, now=NOW)
    nc = meta.condition(conds, "NodeClassReady")
    ready = meta.condition(conds, "Ready")
    assert nc is not None
    assert ready is not None
    assert nc.reason == "NodeClassNotFound"
    assert "'default'" in nc.message
    assert ready.reason == "UnhealthyDependents"
    assert "NodeClassReady=False" in ready.message
    invalid = nodepool_status.nodepool_conditions(
        (), pool=None, validation_error="spec.weight: x", nodeclasses={}, now=NOW
    )
    failed = meta.condition(invalid, "ValidationSucceeded")
    assert failed is not None
    assert (failed.reason, failed.message) == ("NodePoolValidationFailed", "spec.weight: x")


def test_transition_time_moves_only_when_status_changes() -> None:
    classes = {"default": parsed_nodeclass(status=nodeclass_status("True"))}
    first = nodepool_status.nodepool_conditions((), pool=POOL, validation_error="", nodeclasses=classes, now=NOW)
    same = nodepool_status.nodepool_conditions(first, pool=POOL, validation_error="", nodeclasses=classes, now=NOW + 60)
    assert meta.condition(same, "Ready") == meta.condition(first, "Ready")
    flipped = nodepool_status.nodepool_conditions(same, pool=POOL, validation_error="", nodeclasses={}, now=NOW + 120)
    ready = meta.condition(flipped, "Ready")
    assert ready is not None
    assert ready.last_transition_time == NOW + 120


def test_status_patch_carries_usage_and_is_none_once_written() -> None:
    raw = builders.nodepool("good")
    usage = {"cpu": 4000, "memory": 16 * GiB, "nodes": 2000}
    classes = {"default": parsed_nodeclass(status=nodeclass_status("True"))}
    patch = nodepool_status.nodepool_status_patch(raw, pool=POOL, validation_error="", nodeclasses=classes, usage=usage,
                                             now=NOW)  # fmt: skip
    assert patch is not None
    body = patch["status"]
    assert body["resources"] == {"cpu": "4", "memory": "16Gi"}  # "nodes" is a count, not a resource
    assert body["nodes"] == 2
    assert body["nodeClassObservedGeneration"] == 3
    written = {**copy.deepcopy(raw), "status": body}
    again = nodepool_status.nodepool_status_patch(
        written, pool=POOL, validation_error="", nodeclasses=classes, usage=usage, now=NOW + 30
    )
    assert again is None


def test_hash_patch_until_annotated() -> None:
    stamp = drift_hash.nodepool_stamp(POOL)
    patch = drift_hash.hash_patch(POOL.metadata, stamp)
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
    assert drift_hash.hash_patch(parse.nodepool(raw).metadata, stamp) is None


def test_karpys_hash_versions_are_its_own() -> None:
    # Upstream v1.14 stamps "v3" (nodepool) and "v6" (ec2nodeclass) over hashstructure values that karpy's sha256
    # cannot reproduce: sharing a version value would compare the two and drift every node on a take-over.
    assert labels.NODEPOOL_HASH_VERSION not in ("v1", "v2", "v3")
    assert labels.EC2NODECLASS_HASH_VERSION not in ("v1", "v2", "v3", "v4", "v5", "v6")


DRIFTED = {"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "",
           "lastTransitionTime": "2023-11-14T22:13:20Z"}  # fmt: skip


@pytest.mark.parametrize(
    ("annotations", "conditions", "expected"),
    [
        # upstream's stamp: our version and the pool's hash now
        ({"nodepool-hash": "4012279412359526432", "nodepool-hash-version": "v3"}, [], {"version", "hash"}),
        # no stamp at all (a claim made before hashes existed)
        ({}, [], {"version", "hash"}),
        # already Drifted: only the version moves, so it stays drifted (core: updateNodeClaimHash)
        ({"nodepool-hash": "4012279412359526432", "nodepool-hash-version": "v3"}, [DRIFTED], {"version"}),
        # already ours: nothing to do, even when the hash differs (that is drift, not a re-stamp)
        ({"nodepool-hash": "other", "nodepool-hash-version": labels.NODEPOOL_HASH_VERSION}, [], None),
    ],
)
def test_restamp_patch(
    annotations: dict[str, str], conditions: list[dict[str, str]], expected: set[str] | None
) -> None:
    raw = builders.nodeclaim("c", conditions=conditions) if conditions else builders.nodeclaim("c")
    raw["metadata"]["annotations"] = {f"karpenter.sh/{k}": v for k, v in annotations.items()}
    stamp = drift_hash.nodepool_stamp(POOL)
    patch = drift_hash.restamp_patch(parse.nodeclaim(raw), stamp)
    if expected is None:
        assert patch is None
        return
    assert patch is not None
    wanted = {"version": (stamp.version_key, labels.NODEPOOL_HASH_VERSION), "hash": (stamp.hash_key, stamp.value)}
    assert patch == {"metadata": {"annotations": dict(wanted[k] for k in sorted(expected))}}


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
    patch = patches.finalizers_patch(raw, add=add, remove=remove)
    if expected is None:
        assert patch is None
    else:
        assert patch == [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/metadata/finalizers", "value": expected},
        ]
