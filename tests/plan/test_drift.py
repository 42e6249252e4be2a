"""Drift verdicts of `karpy plan` (pure): the NodePool's static fields (upstream's table, core:
pkg/controllers/nodeclaim/disruption/drift_test.go "should detect drift on changes to the static fields"),
requirements, the EC2NodeClass hash and its selectors, resolved from ids or reported as "may drift"."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests import builders

from karpy.api import ec2nodeclass, hashing, labels, nodeclaim, nodepool, parse
from karpy.cloudprovider import types
from karpy.plan import drift

ZONE = "us-east-1a"
AT = "2027-01-15T07:00:00Z"
STATUS = {
    "subnets": [
        {"id": "subnet-a1", "zone": ZONE},
        {"id": "subnet-a2", "zone": ZONE},
        {"id": "subnet-b1", "zone": "us-east-1b"},
    ],
    "securityGroups": [{"id": "sg-1"}, {"id": "sg-2"}],
    "amis": [{"id": "ami-old", "name": "al2023", "requirements": []}],
}


def launched() -> dict[str, str]:
    return builders.condition("Launched", lastTransitionTime=AT)


def changed_pool(**fields: Any) -> dict[str, Any]:
    return builders.nodepool(**fields)


def class_body(**fields: Any) -> dict[str, Any]:
    return builders.ec2nodeclass(status=STATUS, **fields)


def claim_of(pool: nodepool.NodePool, nc: ec2nodeclass.EC2NodeClass, **fields: Any) -> nodeclaim.NodeClaim:
    annotations = {
        labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(pool),
        labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
        labels.ANNOTATION_EC2NODECLASS_HASH: hashing.ec2nodeclass_hash(nc),
        labels.ANNOTATION_EC2NODECLASS_HASH_VERSION: labels.EC2NODECLASS_HASH_VERSION,
        **fields.pop("annotations", {}),
    }
    return builders.parsed_nodeclaim(
        annotations=annotations,
        labels={labels.LABEL_ARCH: "amd64", labels.LABEL_ZONE: ZONE},
        status={"imageID": "ami-old"},
        **({"conditions": [launched()]} | fields),
    )


def decide(
    proposed_pool: dict[str, Any] | None = None,
    proposed_class: dict[str, Any] | None = None,
    *,
    pool: dict[str, Any] | None = None,
    **claim: Any,
) -> drift.Verdict:
    current_pool, current_class = parse.nodepool(pool or changed_pool()), parse.ec2nodeclass(class_body())
    found = claim_of(current_pool, current_class, **claim)
    return drift.verdict(
        found,
        found.metadata.labels,
        pools=(current_pool, parse.nodepool(proposed_pool) if proposed_pool else current_pool),
        classes=(current_class, parse.ec2nodeclass(proposed_class) if proposed_class else current_class),
    )


@pytest.mark.parametrize(
    ("case", "change", "field"),
    [
        ("Annotations", {"template_annotations": {"keyAnnotationTest": "valueAnnotationTest"}}, "metadata"),
        ("Labels", {"labels": {"keyLabelTest": "valueLabelTest"}}, "metadata"),
        ("Taints", {"taints": [{"key": "keytest2taint", "effect": "NoExecute"}]}, "spec.taints"),
        (
            "StartupTaints",
            {"template_spec": {"startupTaints": [{"key": "keytest2taint", "effect": "NoExecute"}]}},
            "spec.startupTaints",
        ),
        ("NodeClassRef Name", {"node_class": "testName"}, "spec.nodeClassRef.name"),
        ("ExpireAfter", {"template_spec": {"expireAfter": "100m"}}, "spec.expireAfter"),
        (
            "TerminationGracePeriod",
            {"template_spec": {"terminationGracePeriod": "100m"}},
            "spec.terminationGracePeriod",
        ),
    ],
)
def test_a_static_field_change_drifts_naming_the_field(case: str, change: dict[str, Any], field: str) -> None:
    found = decide(changed_pool(**change))
    assert (found.outcome, found.reason) == (drift.Outcome.DRIFTS, drift.Reason.NODEPOOL), case
    assert found.fields
    assert all(f.startswith(f"spec.template.{field}") for f in found.fields), found.fields


def test_disruption_limits_and_weight_do_not_drift() -> None:
    proposed = changed_pool(
        disruption={"budgets": [{"nodes": "1"}], "consolidateAfter": "1h"}, limits={"cpu": "10"}, weight=50
    )
    assert decide(proposed) == drift.NO_DRIFT


def test_another_hash_version_may_drift() -> None:
    # upstream: "should not return drifted if the NodeClaim's karpenter.sh/nodepool-hash-version annotation does
    # not match the NodePool's"; karpy re-stamps such a claim (nodepool/drift_hash.py), before or after the change
    found = decide(
        changed_pool(template_spec={"expireAfter": "100m"}),
        annotations={labels.ANNOTATION_NODEPOOL_HASH_VERSION: "v3"},
    )
    assert (found.outcome, found.reason, found.fields) == (
        drift.Outcome.MAY_DRIFT,
        drift.Reason.NODEPOOL,
        ("spec.template.spec.expireAfter",),
    )
    unchanged = decide(changed_pool(), annotations={labels.ANNOTATION_NODEPOOL_HASH_VERSION: "v3"})
    assert unchanged == drift.NO_DRIFT


def test_a_requirement_the_node_no_longer_meets_drifts() -> None:
    proposed = changed_pool(requirements=[builders.requirement(labels.LABEL_ARCH, "In", "arm64")])
    found = decide(proposed)
    assert (found.outcome, found.reason) == (drift.Outcome.DRIFTS, drift.Reason.REQUIREMENTS)
    assert labels.LABEL_ARCH in found.message


def test_a_requirement_the_node_still_meets_does_not() -> None:
    proposed = changed_pool(requirements=[builders.requirement(labels.LABEL_ARCH, "In", "amd64", "arm64")])
    assert decide(proposed) == drift.NO_DRIFT


def test_a_hashed_node_class_field_drifts() -> None:
    found = decide(proposed_class=class_body(role="AnotherRole"))
    assert (found.outcome, found.reason, found.fields) == (drift.Outcome.DRIFTS, drift.Reason.NODECLASS, ("spec.role",))


def test_a_claim_without_a_node_class_hash_is_not_drifted_by_it() -> None:
    # aws: pkg/cloudprovider/drift.go areStaticFieldsDrifted: a missing annotation is no drift
    current = parse.nodepool(changed_pool())
    nc = parse.ec2nodeclass(class_body())
    bare = builders.parsed_nodeclaim(
        annotations={
            labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(current),
            labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
        },
        labels={labels.LABEL_ARCH: "amd64"},
        conditions=[launched()],
    )
    found = drift.verdict(
        bare, {}, pools=(current, current), classes=(nc, parse.ec2nodeclass(class_body(role="AnotherRole")))
    )
    assert found == drift.NO_DRIFT


@pytest.mark.parametrize(
    ("terms", "outcome", "reason"),
    [
        ([{"id": "ami-new"}], drift.Outcome.DRIFTS, drift.Reason.AMI),
        ([{"id": "ami-old"}, {"id": "ami-new"}], drift.Outcome.NONE, None),
        ([{"alias": "al2023@v20250101"}], drift.Outcome.MAY_DRIFT, drift.Reason.AMI),
        ([{"tags": {"team": "a"}}], drift.Outcome.MAY_DRIFT, drift.Reason.AMI),
    ],
)
def test_ami_selectors(terms: list[dict[str, Any]], outcome: drift.Outcome, reason: drift.Reason | None) -> None:
    proposed = class_body()
    proposed["spec"]["amiSelectorTerms"] = terms
    if "alias" not in terms[0]:
        proposed["spec"]["amiFamily"] = "AL2023"
    found = decide(proposed_class=proposed)
    assert (found.outcome, found.reason) == (outcome, reason), found.message


@pytest.mark.parametrize(
    ("ids", "outcome"),
    [
        (["subnet-a1", "subnet-a2", "subnet-c9"], drift.Outcome.NONE),  # every subnet of the node's zone kept
        (["subnet-b1"], drift.Outcome.DRIFTS),  # none of the node's zone kept
        (["subnet-a1", "subnet-b1"], drift.Outcome.MAY_DRIFT),  # which of the zone's two the node is in: unknown
    ],
)
def test_subnet_selectors_by_id(ids: list[str], outcome: drift.Outcome) -> None:
    proposed = class_body(subnetSelectorTerms=[{"id": i} for i in ids])
    found = decide(proposed_class=proposed)
    assert found.outcome == outcome, found.message
    assert found.reason in (None, drift.Reason.SUBNET)


@pytest.mark.parametrize(
    ("terms", "outcome"),
    [
        ([{"id": "sg-2"}, {"id": "sg-1"}], drift.Outcome.NONE),
        ([{"id": "sg-1"}], drift.Outcome.DRIFTS),
        ([{"name": "nodes"}], drift.Outcome.MAY_DRIFT),
    ],
)
def test_security_group_selectors(terms: list[dict[str, Any]], outcome: drift.Outcome) -> None:
    found = decide(proposed_class=class_body(securityGroupSelectorTerms=terms))
    assert found.outcome == outcome, found.message


SUBNETS, GROUPS = types.SelectorField.SUBNET, types.SelectorField.SECURITY_GROUP


@pytest.mark.parametrize(
    ("field", "change", "resolved", "outcome"),
    [
        # What the tag selectors resolve to in EC2, judged as terms by id are (the provider's drift.drift_reason).
        (SUBNETS, {"subnetSelectorTerms": [{"tags": {"tier": "b"}}]}, {"subnet-b1"}, drift.Outcome.DRIFTS),
        (SUBNETS, {"subnetSelectorTerms": [{"tags": {"tier": "a"}}]}, {"subnet-a1", "subnet-a2"}, drift.Outcome.NONE),
        (SUBNETS, {"subnetSelectorTerms": [{"tags": {"x": "y"}}]}, {"subnet-a1"}, drift.Outcome.MAY_DRIFT),
        (GROUPS, {"securityGroupSelectorTerms": [{"tags": {"t": "n"}}]}, {"sg-3"}, drift.Outcome.DRIFTS),
        (GROUPS, {"securityGroupSelectorTerms": [{"tags": {"t": "o"}}]}, {"sg-1", "sg-2"}, drift.Outcome.NONE),
        (GROUPS, {"securityGroupSelectorTerms": [{"tags": {"t": "e"}}]}, set(), drift.Outcome.NONE),  # NotReady
    ],
)
def test_selectors_resolved_from_ec2(
    field: types.SelectorField, change: dict[str, Any], resolved: set[str], outcome: drift.Outcome
) -> None:
    current, proposed = parse.ec2nodeclass(class_body()), parse.ec2nodeclass(class_body(**change))
    claim = claim_of(parse.nodepool(changed_pool()), current)
    found = drift.selector_verdict(
        claim,
        claim.metadata.labels,
        current,
        proposed,
        types.SelectorResolution(ids={field: frozenset(resolved)}),
    )
    assert (found or drift.NO_DRIFT).outcome == outcome, found


def test_a_selector_that_resolves_to_nothing_does_not_drift_and_says_why() -> None:
    current = parse.ec2nodeclass(class_body())
    proposed = parse.ec2nodeclass(class_body(securityGroupSelectorTerms=[{"tags": {"t": "gone"}}]))
    claim = claim_of(parse.nodepool(changed_pool()), current)
    empty = types.SelectorResolution(ids={GROUPS: frozenset()})
    found = drift.selector_verdict(claim, claim.metadata.labels, current, proposed, empty)
    assert found is not None
    assert found.outcome == drift.Outcome.NONE
    assert "select nothing: the node class goes NotReady, which the controller never drifts on" in found.message


def test_a_selector_ec2_could_not_resolve_may_drift_saying_why() -> None:
    current = parse.ec2nodeclass(class_body())
    proposed = parse.ec2nodeclass(class_body(securityGroupSelectorTerms=[{"tags": {"t": "n"}}]))
    claim = claim_of(parse.nodepool(changed_pool()), current)
    refused = types.SelectorResolution(errors={GROUPS: "UnauthorizedOperation"})
    found = drift.selector_verdict(claim, claim.metadata.labels, current, proposed, refused)
    assert found is not None
    assert (found.outcome, found.reason) == (drift.Outcome.MAY_DRIFT, drift.Reason.SECURITY_GROUP)
    assert found.message.endswith("resolving them read-only failed: UnauthorizedOperation")


def test_an_already_drifted_claim_stays_drifted() -> None:
    found = decide(conditions=[launched(), builders.condition("Drifted", reason="AMIDrifted", lastTransitionTime=AT)])
    assert (found.outcome, found.reason) == (drift.Outcome.DRIFTS, drift.Reason.ALREADY)


def test_a_claim_not_launched_yet_never_drifts() -> None:
    # upstream: "should remove the status condition from the nodeClaim when the nodeClaim launch condition is false"
    found = decide(changed_pool(template_spec={"expireAfter": "100m"}), conditions=[])
    assert found == drift.NO_DRIFT


def test_a_deleted_pool_deletes_its_claims() -> None:
    current_pool, nc = parse.nodepool(changed_pool()), parse.ec2nodeclass(class_body())
    found = drift.verdict(claim_of(current_pool, nc), {}, pools=(current_pool, None), classes=(nc, nc))
    assert found.outcome == drift.Outcome.DELETED


def test_changed_fields_names_leaves() -> None:
    before = {"a": {"b": 1, "c": [1]}, "d": 1}
    after = copy.deepcopy(before) | {"a": {"b": 2, "c": [1]}, "e": 1}
    assert drift.changed_fields(before, after, prefix="x") == ("x.a.b", "x.e")
