"""Table tests of the pure lifecycle steps (upstream lifecycle/*.go semantics)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests.nodeclaim import builders as nodeclaim_builders

from karpy.api import labels, meta, nodeclaim
from karpy.nodeclaim import conditions, expiration, lifecycle

T0 = nodeclaim_builders.T0
UNREG = {"key": labels.TAINT_UNREGISTERED_KEY, "effect": "NoExecute"}


# --- conditions -------------------------------------------------------------------------------------------------


def test_transition_time_moves_only_when_status_changes() -> None:
    first = conditions.set_condition((), "Drained", "Unknown", now=10.0, reason="Draining")
    same = conditions.set_condition(first, "Drained", "Unknown", now=20.0, reason="Other", message="m")
    flipped = conditions.set_condition(same, "Drained", "True", now=30.0)
    assert first[0].last_transition_time == 10.0
    assert same[0].last_transition_time == 10.0
    assert same[0].reason == "Other"
    assert same[0].message == "m"
    assert flipped[0].last_transition_time == 30.0
    assert flipped[0].reason == "Drained"
    assert len(flipped) == 1


def test_ensure_unknown_keeps_existing() -> None:
    start = conditions.set_condition((), nodeclaim.LAUNCHED, "True", now=5.0)
    out = conditions.ensure_unknown(start, *lifecycle.LIFECYCLE_CONDITIONS, now=9.0)
    assert [(c.type, c.status, c.last_transition_time) for c in out] == [
        (nodeclaim.LAUNCHED, "True", 5.0),
        (nodeclaim.REGISTERED, "Unknown", 9.0),
        (nodeclaim.INITIALIZED, "Unknown", 9.0),
    ]


def test_bad_condition_status_is_refused() -> None:
    with pytest.raises(ValueError, match="True, False or Unknown"):
        conditions.set_condition((), "X", "yes", now=0.0)


# --- launch -----------------------------------------------------------------------------------------------------


def test_launch_result_copies_instance_facts() -> None:
    claim = nodeclaim_builders.claim()
    resolved = dataclasses.replace(
        claim,
        metadata=dataclasses.replace(
            claim.metadata, labels={labels.LABEL_INSTANCE_TYPE: "m5.large", labels.LABEL_ZONE: "zone-a"}
        ),
        status=nodeclaim.NodeClaimStatus(
            provider_id="fake://zone-a/i-1", image_id="ami-1", capacity={"cpu": 2000}, allocatable={"cpu": 1900}
        ),
    )
    out = lifecycle.launch_result(claim, resolved, now=T0 + 3)
    assert out.status.provider_id == "fake://zone-a/i-1"
    assert out.status.image_id == "ami-1"
    assert out.status.capacity == {"cpu": 2000}
    assert out.status.allocatable == {"cpu": 1900}
    assert out.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"
    assert out.metadata.labels[labels.LABEL_NODEPOOL] == "default"  # the claim's own labels stay
    assert out.is_true(nodeclaim.LAUNCHED)
    assert lifecycle.missing_labels(claim, out.metadata.labels) == {
        labels.LABEL_INSTANCE_TYPE: "m5.large",
        labels.LABEL_ZONE: "zone-a",
    }


# --- registration -----------------------------------------------------------------------------------------------


def _launched(**kwargs: Any) -> nodeclaim.NodeClaim:
    return nodeclaim_builders.claim(
        status={
            "providerID": "fake://zone-a/i-00000001",
            "conditions": [nodeclaim_builders.cond("Launched", "True", T0)],
        },
        **kwargs,
    )


def test_registration_syncs_everything_onto_the_node() -> None:
    claim = _launched(
        taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
        startup_taints=[{"key": "cni", "effect": "NoSchedule"}],
        annotations={"karpenter.sh/nodepool-hash": "123"},
    )
    node = nodeclaim_builders.node_dict(taints=[UNREG, {"key": "other", "effect": "NoExecute"}], finalizers=["x/keep"])
    out = lifecycle.registration_patch(claim, node, now=T0 + 60)
    assert out.error == ""
    patch = out.node_patch
    assert patch is not None
    assert patch["spec"]["taints"] == [
        {"key": "other", "effect": "NoExecute"},
        {"key": "team", "effect": "NoSchedule", "value": "a"},
        {"key": "cni", "effect": "NoSchedule"},
    ]
    md = patch["metadata"]
    assert md["labels"] == {labels.LABEL_NODEPOOL: "default", labels.LABEL_REGISTERED: "true"}
    assert md["annotations"] == {"karpenter.sh/nodepool-hash": "123"}
    assert md["finalizers"] == ["x/keep", labels.FINALIZER_TERMINATION]
    assert md["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "name": claim.name,
            "uid": claim.metadata.uid,
            "blockOwnerDeletion": True,
        }
    ]
    assert md["resourceVersion"] == "7"  # optimistic lock: lists are replaced whole
    assert out.claim.status.node_name == "ip-10-0-0-1"
    assert out.claim.is_true(nodeclaim.REGISTERED)


def test_registration_does_not_sync_taints_when_told_not_to() -> None:
    claim = _launched(
        taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
        labels={labels.LABEL_DO_NOT_SYNC_TAINTS: "true"},
    )
    out = lifecycle.registration_patch(claim, nodeclaim_builders.node_dict(), now=T0)
    assert out.node_patch is not None
    assert out.node_patch["spec"]["taints"] == []  # only the unregistered taint went


def test_registration_keeps_an_existing_taint_with_the_same_key_and_effect() -> None:
    claim = _launched(taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    node = nodeclaim_builders.node_dict(taints=[UNREG, {"key": "team", "value": "b", "effect": "NoSchedule"}])
    out = lifecycle.registration_patch(claim, node, now=T0)
    assert out.node_patch is not None
    assert out.node_patch["spec"]["taints"] == [{"key": "team", "value": "b", "effect": "NoSchedule"}]


def test_registration_rerun_on_a_synced_node_writes_nothing_to_it() -> None:
    claim = _launched()
    first = lifecycle.registration_patch(claim, nodeclaim_builders.node_dict(), now=T0)
    assert first.node_patch is not None
    synced = nodeclaim_builders.node_dict(
        taints=[],
        labels={labels.LABEL_NODEPOOL: "default", labels.LABEL_REGISTERED: "true"},
        finalizers=[labels.FINALIZER_TERMINATION],
        owners=[lifecycle.owner_reference(claim)],
    )
    again = lifecycle.registration_patch(claim, synced, now=T0 + 1)
    assert again.node_patch is None
    assert again.claim.is_true(nodeclaim.REGISTERED)


def test_registration_refuses_a_node_without_the_unregistered_taint() -> None:
    out = lifecycle.registration_patch(_launched(), nodeclaim_builders.node_dict(taints=[]), now=T0)
    assert out.node_patch is None
    assert "karpenter.sh/unregistered" in out.error
    found = out.claim.condition(nodeclaim.REGISTERED)
    assert found is not None
    assert (found.status, found.reason) == ("False", "UnregisteredTaintNotFound")


# --- initialization ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_kwargs", "claim_kwargs", "expected"),
    [
        ({"taints": []}, {}, (True, "")),
        ({"taints": [], "ready": False}, {}, (False, "NodeNotReady")),
        (
            {"taints": [{"key": "cni", "effect": "NoSchedule"}]},
            {"startup_taints": [{"key": "cni", "effect": "NoSchedule"}]},
            (False, "StartupTaintsExist"),
        ),
        (
            {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
            {},
            (False, "KnownEphemeralTaintsExist"),
        ),
        (
            {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
            {},
            (False, "KnownEphemeralTaintsExist"),
        ),
        (
            {
                "taints": [
                    {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
                ]
            },
            {},
            (False, "KnownEphemeralTaintsExist"),
        ),
        ({"taints": [UNREG]}, {}, (False, "KnownEphemeralTaintsExist")),
        (
            {"taints": [{"key": "readiness.k8s.io/network", "effect": "NoSchedule"}]},
            {},
            (False, "KnownEphemeralTaintsExist"),
        ),
        # unreachable:NoExecute is not in upstream's list: the node lifecycle controller, not the kubelet, owns it
        ({"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}, {}, (True, "")),
        ({"taints": []}, {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}, (False, "ResourceNotRegistered")),
        (
            {"taints": [], "allocatable": {"cpu": "4", "nvidia.com/gpu": "0"}},
            {"requests": {"nvidia.com/gpu": "1"}},
            (False, "ResourceNotRegistered"),
        ),
        (
            {"taints": [], "allocatable": {"cpu": "4", "nvidia.com/gpu": "1"}},
            {"requests": {"nvidia.com/gpu": "1"}},
            (True, ""),
        ),
        ({"taints": [{"key": "team", "effect": "NoSchedule"}]}, {}, (True, "")),  # ordinary taints do not matter
    ],
)
def test_initialized(node_kwargs: dict[str, Any], claim_kwargs: dict[str, Any], expected: tuple[bool, str]) -> None:
    ok, reason, message = lifecycle.initialized(_launched(**claim_kwargs), nodeclaim_builders.node_dict(**node_kwargs))
    assert (ok, reason) == expected
    assert bool(message) == (not ok)


def test_initialization_patch_only_when_label_missing() -> None:
    assert lifecycle.initialization_patch(nodeclaim_builders.node_dict()) == {
        "metadata": {"labels": {labels.LABEL_INITIALIZED: "true"}}
    }
    assert (
        lifecycle.initialization_patch(nodeclaim_builders.node_dict(labels={labels.LABEL_INITIALIZED: "true"})) is None
    )


# --- liveness ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conds", "elapsed", "expected"),
    [
        ([], 299.0, None),
        ([], 300.0, lifecycle.LivenessReason.LAUNCH_TIMEOUT),
        (
            [nodeclaim_builders.cond("Launched", "False", T0 + 100)],
            399.0,
            None,
        ),  # measured from the condition's transition
        ([nodeclaim_builders.cond("Launched", "False", T0 + 100)], 400.0, lifecycle.LivenessReason.LAUNCH_TIMEOUT),
        ([nodeclaim_builders.cond("Launched", "True", T0 + 10)], 899.0, None),
        ([nodeclaim_builders.cond("Launched", "True", T0 + 10)], 900.0, lifecycle.LivenessReason.REGISTRATION_TIMEOUT),
        (
            [
                nodeclaim_builders.cond("Launched", "True", T0 + 10),
                nodeclaim_builders.cond("Registered", "Unknown", T0),
            ],
            900.0,
            lifecycle.LivenessReason.REGISTRATION_TIMEOUT,
        ),
        (
            [nodeclaim_builders.cond("Launched", "True", T0), nodeclaim_builders.cond("Registered", "True", T0 + 60)],
            10_000.0,
            None,
        ),
    ],
)
def test_liveness(conds: list[dict[str, str]], elapsed: float, expected: lifecycle.LivenessReason | None) -> None:
    claim = nodeclaim_builders.claim(status={"conditions": conds} if conds else None)
    assert lifecycle.liveness(claim, T0 + elapsed) == expected


# --- termination grace period and expiry ------------------------------------------------------------------------


def test_termination_timestamp_annotation() -> None:
    assert (
        lifecycle.termination_timestamp_annotation(nodeclaim_builders.claim(termination_grace_period="1h")) is None
    )  # not deleting
    assert (
        lifecycle.termination_timestamp_annotation(nodeclaim_builders.claim(deleted=nodeclaim_builders.ts(T0))) is None
    )  # no TGP
    text = lifecycle.termination_timestamp_annotation(
        nodeclaim_builders.claim(termination_grace_period="1h30m", deleted=nodeclaim_builders.ts(T0 + 5))
    )
    assert text == "2023-11-14T23:43:25Z"  # T0 = 2023-11-14T22:13:20Z; + 5 s + 90 min
    annotated = nodeclaim_builders.claim(annotations={labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: text})
    assert lifecycle.termination_time(annotated) == T0 + 5 + 5400
    broken = nodeclaim_builders.claim(annotations={labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: "soon"})
    assert lifecycle.termination_time(broken) is None


@pytest.mark.parametrize(
    ("expire_after", "elapsed", "expected"),
    [("720h", 720 * 3600 - 1, False), ("720h", 720 * 3600, True), ("30s", 31, True), ("Never", 10**9, False)],
)
def test_expired(expire_after: str, elapsed: float, expected: bool) -> None:
    assert expiration.expired(nodeclaim_builders.claim(expire_after=expire_after), T0 + elapsed) is expected


def test_a_deleting_claim_does_not_expire_again() -> None:
    assert not expiration.expired(
        nodeclaim_builders.claim(expire_after="1s", deleted=nodeclaim_builders.ts(T0 + 5), finalizers=["x"]), T0 + 100
    )


def test_format_taint() -> None:
    assert lifecycle.format_taint(meta.Taint("a", "NoSchedule", "v")) == "a=v:NoSchedule"
    assert lifecycle.format_taint(meta.Taint("a", "NoSchedule")) == "a:NoSchedule"
