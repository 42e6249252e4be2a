"""Pure builders for the other AWS payloads the component declares: trust policies, queue policy, event rules.

No pulumi import: plain strings in, plain dicts out, so the tests can assert on them exactly.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from pulumi_karpy import policy

QUEUE_RETENTION_SECONDS: Final = 300
"""Upstream's retention: an interruption notice older than five minutes is useless (the 2-minute spot warning)."""

EVENT_TARGET_ID: Final = "KarpenterInterruptionQueueTarget"

POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"


class IdentityMode(enum.StrEnum):
    """How the controller's pods get AWS credentials."""

    IRSA = "irsa"
    """IAM roles for service accounts: an OIDC trust; needed on Fargate, where Pod Identity is not supported."""
    POD_IDENTITY = "pod_identity"
    """EKS Pod Identity: a `pods.eks.amazonaws.com` trust plus an association (needs the eks-pod-identity-agent)."""


@dataclass(frozen=True, slots=True)
class EventRuleSpec:
    """One EventBridge rule feeding the interruption queue."""

    key: str
    """Stable short name, used in the Pulumi resource name and the rule name (`<prefix><key>-<cluster>`)."""
    source: str
    detail_type: str

    def pattern(self) -> dict[str, list[str]]:
        return {"source": [self.source], "detail-type": [self.detail_type]}


EVENT_RULES: Final[tuple[EventRuleSpec, ...]] = (
    EventRuleSpec("scheduled-change", "aws.health", "AWS Health Event"),
    EventRuleSpec("spot-interruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    EventRuleSpec("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    EventRuleSpec("state-change", "aws.ec2", "EC2 Instance State-change Notification"),
    EventRuleSpec(
        "capacity-reservation-interruption", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"
    ),
)

EVENT_RULE_NAME_LIMIT: Final = 64


def event_rule_name(spec: EventRuleSpec, cluster_name: str, *, prefix: str = "karpy-") -> str:
    """`karpy-spot-interruption-<cluster>`: unique per cluster, within EventBridge's 64 characters.

    Long cluster names are shortened with a stable hash suffix so two long names still differ.
    """
    name = f"{prefix}{spec.key}-{cluster_name}"
    if len(name) <= EVENT_RULE_NAME_LIMIT:
        return name
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:8]
    return f"{name[: EVENT_RULE_NAME_LIMIT - 9]}-{digest}"


def queue_policy(queue_arn: str) -> policy.Document:
    """EventBridge (and SQS itself) may send; nobody may use the queue without TLS."""
    return {
        "Version": "2012-10-17",
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Sid": "AllowEventBridgeToSend",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


def node_trust_policy(partition: str) -> policy.Document:
    """EC2 instances assume the node role (`ec2.amazonaws.com.cn` in China)."""
    service = "ec2.amazonaws.com.cn" if partition == "aws-cn" else "ec2.amazonaws.com"
    return policy.document(
        [{"Sid": "EC2AssumeRole", "Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]
    )


def oidc_issuer_host(issuer: str) -> str:
    """`https://oidc.eks.<r>.amazonaws.com/id/X` → `oidc.eks.<r>.amazonaws.com/id/X` (the condition key prefix)."""
    return re.sub(r"^https://", "", issuer).rstrip("/")


def irsa_trust_policy(
    *, oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str
) -> policy.Document:
    """Only `system:serviceaccount:<namespace>:<sa>` with the STS audience may assume the controller role."""
    host = oidc_issuer_host(oidc_issuer)
    return policy.document(
        [
            {
                "Sid": "IRSA",
                "Effect": "Allow",
                "Principal": {"Federated": oidc_provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                        f"{host}:aud": "sts.amazonaws.com",
                    }
                },
            }
        ]
    )


def pod_identity_trust_policy() -> policy.Document:
    return policy.document(
        [
            {
                "Sid": "PodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ]
    )


def node_managed_policy_arns(partition: str, *, ipv6: bool) -> dict[str, str]:
    """Upstream's node role policies, keyed by a stable short name (the Pulumi resource name suffix).

    IPv6 clusters get the customer-managed `AmazonEKS_CNI_IPv6_Policy` (account-local, so the caller passes its ARN)
    instead of the IPv4 CNI policy; see `node_cni_ipv6_policy`.
    """
    base = f"arn:{partition}:iam::aws:policy"
    arns = {
        "worker": f"{base}/AmazonEKSWorkerNodePolicy",
        "ecr": f"{base}/AmazonEC2ContainerRegistryPullOnly",
        "ssm": f"{base}/AmazonSSMManagedInstanceCore",
    }
    if not ipv6:
        arns["cni"] = f"{base}/AmazonEKS_CNI_Policy"
    return arns


def node_cni_ipv6_policy(partition: str) -> policy.Document:
    """The VPC CNI's IPv6 permissions (AWS documents this policy; it is not AWS-managed, so it is created)."""
    return policy.document(
        [
            {
                "Sid": "AssignIPv6",
                "Effect": "Allow",
                "Action": [
                    "ec2:AssignIpv6Addresses",
                    "ec2:DescribeInstances",
                    "ec2:DescribeTags",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeInstanceTypes",
                ],
                "Resource": "*",
            },
            {
                "Sid": "TagENIs",
                "Effect": "Allow",
                "Action": ["ec2:CreateTags"],
                "Resource": [f"arn:{partition}:ec2:*:*:network-interface/*"],
            },
        ]
    )
