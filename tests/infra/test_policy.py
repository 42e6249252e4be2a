"""The controller policy: upstream's statements per group, sizes, partitions, lint, and an allow/deny matrix."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path
from typing import Any

import pytest

from pulumi_karpy import policy

from . import iam_evaluator
from .conftest import ACCOUNT, make_context

SNAPSHOTS = Path(__file__).parent / "snapshots"

# Sids per managed policy, as upstream v1.14 has them (aws:
# website/content/en/preview/getting-started/getting-started-with-karpenter/cloudformation.yaml).
EXPECTED_SIDS = {
    policy.PolicyGroup.NODE_LIFECYCLE: [
        "AllowScopedEC2InstanceAccessActions",
        "AllowScopedEC2LaunchTemplateAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
        "AllowScopedDeletion",
    ],
    policy.PolicyGroup.IAM_INTEGRATION: [
        "AllowPassingInstanceRole",
        "AllowScopedInstanceProfileCreationActions",
        "AllowScopedInstanceProfileTagActions",
        "AllowScopedInstanceProfileActions",
        "AllowUnscopedInstanceProfileListAction",
        "AllowInstanceProfileReadActions",
    ],
    policy.PolicyGroup.EKS_INTEGRATION: ["AllowAPIServerEndpointDiscovery"],
    policy.PolicyGroup.INTERRUPTION: ["AllowInterruptionQueueActions"],
    policy.PolicyGroup.RESOURCE_DISCOVERY: [
        "AllowRegionalReadActions",
        "AllowSSMReadActions",
        "AllowPricingReadActions",
    ],
    policy.PolicyGroup.ZONAL_SHIFT: ["AllowZonalShiftStatusReadOnly"],
}


def statements(docs: dict[policy.PolicyGroup, policy.Document]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for doc in docs.values() for s in doc["Statement"]}


def test_groups_and_sids_follow_upstream() -> None:
    docs = policy.build_controller_policies(make_context())
    assert {group: [s["Sid"] for s in doc["Statement"]] for group, doc in docs.items()} == EXPECTED_SIDS


def test_without_queue_the_interruption_policy_is_omitted() -> None:
    docs = policy.build_controller_policies(make_context(queue=False))
    assert policy.PolicyGroup.INTERRUPTION not in docs
    assert not any("sqs:" in json.dumps(doc) for doc in docs.values())


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_snapshot(partition: str) -> None:
    """Full documents, reviewed against upstream's cloudformation.yaml; regenerate with KARPY_UPDATE_SNAPSHOTS=1 and
    review the diff."""
    region = {"aws": "us-west-2", "aws-cn": "cn-north-1", "aws-us-gov": "us-gov-west-1"}[partition]
    docs = policy.build_controller_policies(make_context(partition=partition, region=region))
    rendered = json.dumps({group.value: doc for group, doc in docs.items()}, indent=2, sort_keys=True) + "\n"
    path = SNAPSHOTS / f"controller-policy-{partition}.json"
    if os.environ.get("KARPY_UPDATE_SNAPSHOTS") == "1":
        path.write_text(rendered)
    assert rendered == path.read_text()


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_every_arn_is_in_the_partition(partition: str) -> None:
    docs = policy.build_controller_policies(make_context(partition=partition))
    for statement in statements(docs).values():
        for resource in statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]:
            assert resource == "*" or resource.startswith(f"arn:{partition}:"), (statement["Sid"], resource)
    zonal = statements(docs)["AllowZonalShiftStatusReadOnly"]["Condition"]["StringEquals"]
    assert zonal["arc-zonal-shift:ResourceIdentifier"] == f"arn:{partition}:eks:us-west-2:{ACCOUNT}:cluster/demo"


def test_pass_role_only_to_ec2() -> None:
    docs = policy.build_controller_policies(make_context())
    pass_role = [s for s in statements(docs).values() if "iam:PassRole" in json.dumps(s["Action"])]
    assert len(pass_role) == 1
    assert pass_role[0]["Resource"] == f"arn:aws:iam::{ACCOUNT}:role/demo-node"
    assert pass_role[0]["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }


@pytest.mark.parametrize("length", [1, 38, 64, 100])
@pytest.mark.parametrize("region", ["us-west-2", "ap-southeast-5", "us-gov-west-1"])
def test_each_document_fits_the_managed_policy_limit(length: int, region: str) -> None:
    partition = "aws-us-gov" if region.startswith("us-gov") else "aws"
    ctx = make_context(partition=partition, region=region, cluster="c" * length)
    for group, doc in policy.build_controller_policies(ctx).items():
        size = policy.minified_size(doc)
        assert size < policy.MANAGED_POLICY_SIZE_LIMIT, (group, size)


def test_the_unsplit_policy_would_not_fit() -> None:
    """Why the split exists: the same statements in one document exceed 6,144 for 100-character names."""
    docs = policy.build_controller_policies(make_context(cluster="c" * 100))
    merged = policy.document([s for doc in docs.values() for s in doc["Statement"]])
    assert policy.minified_size(merged) > policy.MANAGED_POLICY_SIZE_LIMIT


def test_bad_context_is_rejected_with_reasons() -> None:
    ctx = policy.PolicyContext("aws-mars", "", ACCOUNT, "demo", "arn:aws:iam::1:role/x")
    with pytest.raises(ValueError, match=r"partition 'aws-mars'.*region is empty"):
        policy.build_controller_policies(ctx)


# Parliament findings that are upstream's deliberate design, each with its reason; anything else fails.
ACCEPTED_FINDINGS = {
    # RunInstances/CreateFleet touch many resource types; upstream scopes each type in its own statement (tag
    # conditions differ per type), so no single statement lists every type parliament expects.
    ("RESOURCE_MISMATCH", "ec2:RunInstances"),
    ("RESOURCE_MISMATCH", "ec2:CreateFleet"),
    # Public SSM parameters (/aws/service/...) have no account in their ARN; parliament's pattern wants one.
    ("RESOURCE_MISMATCH", "ssm:GetParameter"),
    # Zonal-shift resources are scoped with the arc-zonal-shift:ResourceIdentifier condition, as upstream does.
    ("RESOURCE_STAR", "arc-zonal-shift:GetManagedResource"),
}


def _finding_keys(finding: Any) -> set[tuple[str, str]]:
    detail = finding.detail if isinstance(finding.detail, list) else [finding.detail]
    actions = {d["action"] if isinstance(d, dict) else str(d) for d in detail}
    return {(finding.issue, action) for action in actions}


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_parliament_reports_no_errors(parliament: types.ModuleType, partition: str) -> None:
    docs = policy.build_controller_policies(make_context(partition=partition))
    for group, doc in docs.items():
        analyzed = parliament.analyze_policy_string(json.dumps(doc))
        for finding in analyzed.findings:
            parliament.enhance_finding(finding)
            assert finding.severity not in ("CRITICAL", "HIGH"), (group, finding.issue, finding.detail)
            assert _finding_keys(finding) <= ACCEPTED_FINDINGS, (group, finding.issue, finding.detail)


def test_parliament_catches_a_broken_statement(parliament: types.ModuleType) -> None:
    """The lint is live: a misspelt action is reported."""
    broken = policy.document([{"Effect": "Allow", "Action": "ec2:RunInstancez", "Resource": "*"}])
    issues = {f.issue for f in parliament.analyze_policy_string(json.dumps(broken)).findings}
    assert "UNKNOWN_ACTION" in issues


# ---------------------------------------------------------------------------------------------------------------
# Evaluation matrix (requests as the EC2/IAM APIs would present them).

INSTANCE = f"arn:aws:ec2:us-west-2:{ACCOUNT}:instance/i-0123456789abcdef0"
OWNED = {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned", "aws:ResourceTag/karpenter.sh/nodepool": "default"}
LAUNCH_TAGS = {
    "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
    "aws:RequestTag/eks:eks-cluster-name": "demo",
    "aws:RequestTag/karpenter.sh/nodepool": "default",
    "aws:RequestedRegion": "us-west-2",
}
Req = iam_evaluator.Request
ALLOWED = iam_evaluator.Decision.ALLOWED
DENIED = iam_evaluator.Decision.IMPLICIT_DENY

MATRIX = [
    ("terminate an owned nodepool instance", Req("ec2:TerminateInstances", INSTANCE, OWNED), ALLOWED),
    (
        "terminate without the cluster tag",
        Req("ec2:TerminateInstances", INSTANCE, {"aws:ResourceTag/karpenter.sh/nodepool": "default"}),
        DENIED,
    ),
    (
        "terminate another cluster's instance",
        Req(
            "ec2:TerminateInstances",
            INSTANCE,
            {"aws:ResourceTag/kubernetes.io/cluster/other": "owned", "aws:ResourceTag/karpenter.sh/nodepool": "x"},
        ),
        DENIED,
    ),
    ("RunInstances with the required request tags", Req("ec2:RunInstances", INSTANCE, LAUNCH_TAGS), ALLOWED),
    (
        "RunInstances without the nodepool tag",
        Req("ec2:RunInstances", INSTANCE, {k: v for k, v in LAUNCH_TAGS.items() if "nodepool" not in k}),
        DENIED,
    ),
    (
        "RunInstances with another cluster name",
        Req("ec2:RunInstances", INSTANCE, {**LAUNCH_TAGS, "aws:RequestTag/eks:eks-cluster-name": "other"}),
        DENIED,
    ),
    ("RunInstances on a public image", Req("ec2:RunInstances", "arn:aws:ec2:us-west-2::image/ami-1"), ALLOWED),
    (
        "RunInstances on an image in another region",
        Req("ec2:RunInstances", "arn:aws:ec2:eu-west-1::image/ami-1"),
        DENIED,
    ),
    (
        "CreateTags at launch",
        Req("ec2:CreateTags", INSTANCE, {**LAUNCH_TAGS, "ec2:CreateAction": "RunInstances"}),
        ALLOWED,
    ),
    (
        "CreateTags Name/nodeclaim on a running owned instance",
        Req("ec2:CreateTags", INSTANCE, {**OWNED, "aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]}),
        ALLOWED,
    ),
    (
        "CreateTags adding a foreign key to a running instance",
        Req("ec2:CreateTags", INSTANCE, {**OWNED, "aws:TagKeys": ["Name", "team"]}),
        DENIED,
    ),
    (
        "CreateTags rewriting eks:eks-cluster-name",
        Req(
            "ec2:CreateTags",
            INSTANCE,
            {**OWNED, "aws:TagKeys": ["eks:eks-cluster-name"], "aws:RequestTag/eks:eks-cluster-name": "other"},
        ),
        DENIED,
    ),
    (
        "PassRole of the node role to EC2",
        Req("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/demo-node", {"iam:PassedToService": "ec2.amazonaws.com"}),
        ALLOWED,
    ),
    (
        "PassRole to another service",
        Req("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/demo-node", {"iam:PassedToService": "lambda.amazonaws.com"}),
        DENIED,
    ),
    (
        "PassRole of another role",
        Req("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin", {"iam:PassedToService": "ec2.amazonaws.com"}),
        DENIED,
    ),
    (
        "DescribeInstances in the region",
        Req("ec2:DescribeInstances", "*", {"aws:RequestedRegion": "us-west-2"}),
        ALLOWED,
    ),
    (
        "DescribeInstances outside the region",
        Req("ec2:DescribeInstances", "*", {"aws:RequestedRegion": "eu-west-1"}),
        DENIED,
    ),
    (
        "SSM parameter outside the region",
        Req(
            "ssm:GetParameter",
            "arn:aws:ssm:eu-west-1::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/"
            "recommended/image_id",
        ),
        DENIED,
    ),
    (
        "receive from the interruption queue",
        Req("sqs:ReceiveMessage", f"arn:aws:sqs:us-west-2:{ACCOUNT}:demo"),
        ALLOWED,
    ),
    ("receive from another queue", Req("sqs:ReceiveMessage", f"arn:aws:sqs:us-west-2:{ACCOUNT}:payments"), DENIED),
    (
        "delete an instance profile this cluster owns",
        Req(
            "iam:DeleteInstanceProfile",
            f"arn:aws:iam::{ACCOUNT}:instance-profile/demo_123",
            {
                "aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
                "aws:ResourceTag/topology.kubernetes.io/region": "us-west-2",
                "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "default",
            },
        ),
        ALLOWED,
    ),
    (
        "delete an unowned instance profile",
        Req("iam:DeleteInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/admin"),
        DENIED,
    ),
    ("describe another cluster", Req("eks:DescribeCluster", f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/other"), DENIED),
    (
        "zonal shift for this cluster",
        Req(
            "arc-zonal-shift:GetManagedResource",
            "*",
            {"arc-zonal-shift:ResourceIdentifier": f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/demo"},
        ),
        ALLOWED,
    ),
]


@pytest.mark.parametrize(("case", "request_", "expected"), MATRIX, ids=[row[0] for row in MATRIX])
def test_evaluation_matrix(case: str, request_: iam_evaluator.Request, expected: iam_evaluator.Decision) -> None:
    docs = policy.build_controller_policies(make_context()).values()
    assert iam_evaluator.evaluate(docs, request_) is expected, case


def test_explicit_deny_in_an_extra_statement_wins() -> None:
    docs = [*policy.build_controller_policies(make_context()).values()]
    deny = policy.document([{"Effect": "Deny", "Action": "ec2:TerminateInstances", "Resource": "*"}])
    request_ = Req("ec2:TerminateInstances", INSTANCE, OWNED)
    assert iam_evaluator.evaluate(docs, request_) is ALLOWED
    assert iam_evaluator.evaluate([*docs, deny], request_) is iam_evaluator.Decision.EXPLICIT_DENY


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}, None),
        ({"Effect": "Permit", "Action": "s3:GetObject", "Resource": "*"}, "[0].Effect: must be 'Allow' or 'Deny'"),
        ({"Effect": "Allow", "Resource": "*"}, "needs Action or NotAction"),
        ({"Effect": "Allow", "Action": "s3:*"}, "needs Resource or NotResource"),
        ({"Effect": "Allow", "Action": "s3:*", "Resource": "*", "Principal": "*"}, "unknown keys ['Principal']"),
    ],
)
def test_extra_statements_validation(statement: dict[str, Any], problem: str | None) -> None:
    problems = policy.validate_extra_statements([statement])
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problem in problems[0]
        assert problems[0].startswith("controller_role.extra_statements[0]")
