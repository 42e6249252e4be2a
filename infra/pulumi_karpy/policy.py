"""The controller's IAM policy as versioned data: pure builders, one managed policy per upstream group.

Keyed to the upstream Karpenter minor it tracks (`KARPENTER_POLICY_VERSION`); statements and Sids copy upstream's
getting-started `cloudformation.yaml` (aws/karpenter-provider-aws, v1.14), split the way upstream splits them since
v1.9 so that every document stays under IAM's 6,144-character managed-policy limit even for 100-character cluster
names. Everything here is plain data in, plain dicts out (no pulumi import), so it is snapshot- and lint-tested.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

KARPENTER_POLICY_VERSION: Final = "1.14"
"""The upstream Karpenter minor whose controller policy this module reproduces."""

MANAGED_POLICY_SIZE_LIMIT: Final = 6144
"""IAM's limit on a managed policy document, counted without whitespace."""

# Upstream hard-codes both principals rather than deriving one from the partition: the aws-cn EC2 principal has
# been reported wrong by service-principal lookups (terraform-aws-eks #3636).
EC2_SERVICE_PRINCIPALS: Final = ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")

PARTITIONS: Final = frozenset({"aws", "aws-cn", "aws-us-gov"})

TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_NODEPOOL: Final = "karpenter.sh/nodepool"
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"
TAG_REGION: Final = "topology.kubernetes.io/region"

Statement = dict[str, Any]
Document = dict[str, Any]


class PolicyGroup(enum.StrEnum):
    """The six upstream managed policies (`KarpenterController<Group>Policy-<cluster>`)."""

    NODE_LIFECYCLE = "NodeLifecycle"
    IAM_INTEGRATION = "IAMIntegration"
    EKS_INTEGRATION = "EKSIntegration"
    INTERRUPTION = "Interruption"
    RESOURCE_DISCOVERY = "ResourceDiscovery"
    ZONAL_SHIFT = "ZonalShift"


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Everything the statements interpolate. All plain strings: resolve Outputs before calling the builders."""

    partition: str
    region: str
    account_id: str
    cluster_name: str
    node_role_arn: str
    queue_arn: str | None = None
    """None when the interruption queue is disabled: the Interruption policy is then omitted."""
    ssm_parameter_arns: tuple[str, ...] = ()
    """Narrows ssm:GetParameter; empty = upstream's `arn:<p>:ssm:<r>::parameter/aws/service/*`."""
    queue_kms_key_arn: str | None = None
    """The customer-managed key encrypting the queue, if any: receiving a message decrypts it with this key."""

    def problems(self) -> list[str]:
        found = []
        if self.partition not in PARTITIONS:
            found.append(f"partition {self.partition!r} is not one of {', '.join(sorted(PARTITIONS))}")
        for label, value in (
            ("region", self.region),
            ("account_id", self.account_id),
            ("cluster_name", self.cluster_name),
        ):
            if not value:
                found.append(f"{label} is empty")
        if not self.node_role_arn.startswith(f"arn:{self.partition}:iam::"):
            found.append(f"node_role_arn {self.node_role_arn!r} is not an IAM ARN in partition {self.partition}")
        return found


def _arn(ctx: PolicyContext, service: str, resource: str, *, region: str | None = None, account: str = "*") -> str:
    return f"arn:{ctx.partition}:{service}:{ctx.region if region is None else region}:{account}:{resource}"


def _ec2(ctx: PolicyContext, *resource_types: str) -> list[str]:
    return [_arn(ctx, "ec2", f"{kind}/*") for kind in resource_types]


def _cluster_tag(ctx: PolicyContext) -> str:
    return f"{TAG_CLUSTER_PREFIX}{ctx.cluster_name}"


_LAUNCHED_TYPES: Final = (
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
)


def node_lifecycle_statements(ctx: PolicyContext) -> list[Statement]:
    """Launch, tag and terminate only what carries this cluster's ownership and NodePool tags."""
    cluster_tag = _cluster_tag(ctx)
    request_tags_owned = {
        f"aws:RequestTag/{cluster_tag}": "owned",
        f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}": ctx.cluster_name,
    }
    resource_owned = {f"aws:ResourceTag/{cluster_tag}": "owned"}
    resource_nodepool = {f"aws:ResourceTag/{TAG_NODEPOOL}": "*"}
    return [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                _arn(ctx, "ec2", "image/*", account=""),
                _arn(ctx, "ec2", "snapshot/*", account=""),
                *_ec2(ctx, "security-group", "subnet", "capacity-reservation", "placement-group"),
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": _ec2(ctx, "launch-template"),
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {"StringEquals": resource_owned, "StringLike": resource_nodepool},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": _ec2(ctx, *_LAUNCHED_TYPES),
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {
                "StringEquals": request_tags_owned,
                "StringLike": {f"aws:RequestTag/{TAG_NODEPOOL}": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": _ec2(ctx, *_LAUNCHED_TYPES),
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    **request_tags_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {f"aws:RequestTag/{TAG_NODEPOOL}": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": _ec2(ctx, "instance"),
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": resource_owned,
                "StringLike": resource_nodepool,
                "StringEqualsIfExists": {f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}": ctx.cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": [TAG_EKS_CLUSTER_NAME, TAG_NODECLAIM, "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": _ec2(ctx, "instance", "launch-template"),
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {"StringEquals": resource_owned, "StringLike": resource_nodepool},
        },
    ]


def iam_integration_statements(ctx: PolicyContext) -> list[Statement]:
    """Pass the node role to EC2 only, and manage only the instance profiles this cluster's EC2NodeClasses own."""
    cluster_tag = _cluster_tag(ctx)
    profiles = f"arn:{ctx.partition}:iam::{ctx.account_id}:instance-profile/*"
    request_owned = {
        f"aws:RequestTag/{cluster_tag}": "owned",
        f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}": ctx.cluster_name,
        f"aws:RequestTag/{TAG_REGION}": ctx.region,
    }
    resource_owned = {f"aws:ResourceTag/{cluster_tag}": "owned", f"aws:ResourceTag/{TAG_REGION}": ctx.region}
    return [
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": ctx.node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": list(EC2_SERVICE_PRINCIPALS)}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": request_owned,
                "StringLike": {f"aws:RequestTag/{TAG_EC2NODECLASS}": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {**resource_owned, **request_owned},
                "StringLike": {
                    f"aws:ResourceTag/{TAG_EC2NODECLASS}": "*",
                    f"aws:RequestTag/{TAG_EC2NODECLASS}": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {
                "StringEquals": resource_owned,
                "StringLike": {f"aws:ResourceTag/{TAG_EC2NODECLASS}": "*"},
            },
        },
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": "iam:GetInstanceProfile",
        },
    ]


def cluster_arn(ctx: PolicyContext) -> str:
    return _arn(ctx, "eks", f"cluster/{ctx.cluster_name}", account=ctx.account_id)


def eks_integration_statements(ctx: PolicyContext) -> list[Statement]:
    """Discover the API server endpoint and CA when CLUSTER_ENDPOINT is not set."""
    return [
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": cluster_arn(ctx),
            "Action": "eks:DescribeCluster",
        }
    ]


def interruption_statements(ctx: PolicyContext) -> list[Statement]:
    """Poll and acknowledge the interruption queue (and nothing else in SQS)."""
    if ctx.queue_arn is None:
        return []
    return [
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": ctx.queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
        # SQS decrypts a KMS-encrypted message for the receiver with the receiver's own kms:Decrypt permission;
        # without it ReceiveMessage fails with KMS.AccessDeniedException. Not in upstream's policy, whose queue uses
        # SSE-SQS (terraform-aws-eks leaves this to the user too).
        *(
            [
                {
                    "Sid": "AllowInterruptionQueueDecryption",
                    "Effect": "Allow",
                    "Resource": ctx.queue_kms_key_arn,
                    "Action": "kms:Decrypt",
                }
            ]
            if ctx.queue_kms_key_arn
            else []
        ),
    ]


def kms_key_arn(key_id: str, *, partition: str, region: str, account_id: str) -> str:
    """A queue's `kms_master_key_id` (a key ID or ARN) as the key ARN an IAM statement names."""
    return key_id if key_id.startswith("arn:") else f"arn:{partition}:kms:{region}:{account_id}:key/{key_id}"


REGIONAL_READ_ACTIONS: Final = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)


def resource_discovery_statements(ctx: PolicyContext) -> list[Statement]:
    """Describe calls pinned to the cluster's region, the public AMI parameters, and prices."""
    ssm = list(ctx.ssm_parameter_arns) or [_arn(ctx, "ssm", "parameter/aws/service/*", account="")]
    return [
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": list(REGIONAL_READ_ACTIONS),
            "Condition": {"StringEquals": {"aws:RequestedRegion": ctx.region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": ssm if len(ssm) > 1 else ssm[0],
            "Action": "ssm:GetParameter",
        },
        {
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "pricing:GetProducts",
        },
    ]


def zonal_shift_statements(ctx: PolicyContext) -> list[Statement]:
    """Read ARC zonal-shift status for this cluster only (upstream scopes it by condition, not by resource)."""
    return [
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "arc-zonal-shift:GetManagedResource",
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn(ctx)}},
        }
    ]


_BUILDERS: Final = {
    PolicyGroup.NODE_LIFECYCLE: node_lifecycle_statements,
    PolicyGroup.IAM_INTEGRATION: iam_integration_statements,
    PolicyGroup.EKS_INTEGRATION: eks_integration_statements,
    PolicyGroup.INTERRUPTION: interruption_statements,
    PolicyGroup.RESOURCE_DISCOVERY: resource_discovery_statements,
    PolicyGroup.ZONAL_SHIFT: zonal_shift_statements,
}


def document(statements: Sequence[Statement]) -> Document:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def build_controller_policies(ctx: PolicyContext) -> dict[PolicyGroup, Document]:
    """One policy document per upstream group; Interruption only when the context has a queue ARN."""
    problems = ctx.problems()
    if problems:
        raise ValueError("invalid policy context: " + "; ".join(problems))
    built = {group: builder(ctx) for group, builder in _BUILDERS.items()}
    return {group: document(statements) for group, statements in built.items() if statements}


def minified_size(doc: Mapping[str, Any]) -> int:
    """The length IAM checks against its limit (whitespace is not counted)."""
    return len(json.dumps(doc, separators=(",", ":")))


def validate_queue_statements(statements: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems with user-supplied queue policy statements (a resource policy: Principal required)."""
    return _statement_problems(
        statements,
        path="queue.policy_statements",
        allowed={"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "Condition"},
        needs=(("Action", "NotAction"), ("Principal", "NotPrincipal")),
    )


def validate_extra_statements(statements: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems with user-supplied statements, each naming `extra_statements[i].<field>`."""
    return _statement_problems(
        statements,
        path="controller_role.extra_statements",
        allowed={"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"},
        needs=(("Action", "NotAction"), ("Resource", "NotResource")),
        unknown_hint=" (Principal does not belong in an identity policy)",
    )


def _statement_problems(
    statements: Sequence[Mapping[str, Any]],
    *,
    path: str,
    allowed: set[str],
    needs: Sequence[tuple[str, str]],
    unknown_hint: str = "",
) -> list[str]:
    problems = []
    for index, statement in enumerate(statements):
        where = f"{path}[{index}]"
        unknown = sorted(set(statement) - allowed)
        if unknown:
            problems.append(f"{where}: unknown keys {unknown}{unknown_hint}")
        effect = statement.get("Effect")
        # A value not known yet (a Pulumi Output, which has `apply`) is left to IAM to judge.
        if not hasattr(effect, "apply") and effect not in ("Allow", "Deny"):
            problems.append(f"{where}.Effect: must be 'Allow' or 'Deny'")
        problems += [
            f"{where}: needs {one} or {other}"
            for one, other in needs
            if one not in statement and other not in statement
        ]
    return problems
