"""Pure builders for the other AWS payloads the component declares: trust policies, queue policy, event rules.

No pulumi import: plain strings in, plain dicts out, so the tests can assert on them exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_karpy import policy

QUEUE_RETENTION_SECONDS: Final = 300
"""Upstream's retention: an interruption notice older than five minutes is useless (the 2-minute spot warning)."""

EVENT_TARGET_ID: Final = "KarpenterInterruptionQueueTarget"

POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"


@dataclass(frozen=True, slots=True)
class EventRuleSpec:
    """One EventBridge rule feeding the interruption queue."""

    key: str
    """Stable short name, used in the Pulumi resource name (`<component>-rule-<key>`)."""
    name: str
    """Short name in the generated rule name (`<prefix><name>-<unique suffix>`), terraform-aws-eks' rule names."""
    source: str
    detail_type: str

    def pattern(self) -> dict[str, list[str]]:
        return {"source": [self.source], "detail-type": [self.detail_type]}


EVENT_RULES: Final[tuple[EventRuleSpec, ...]] = (
    EventRuleSpec("scheduled-change", "HealthEvent", "aws.health", "AWS Health Event"),
    EventRuleSpec("spot-interruption", "SpotInterrupt", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    EventRuleSpec("rebalance", "InstanceRebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    EventRuleSpec("state-change", "InstanceStateChange", "aws.ec2", "EC2 Instance State-change Notification"),
    EventRuleSpec(
        "capacity-reservation-interruption",
        "CRInterruption",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
)


def event_rule_name_prefix(spec: EventRuleSpec, prefix: str) -> str:
    """`karpy-SpotInterrupt-`: AWS appends a unique suffix, so two stacks on one cluster never collide."""
    return f"{prefix}{spec.name}-"


def queue_policy(queue_arn: str, extra_statements: Sequence[Mapping[str, Any]] = ()) -> policy.Document:
    """EventBridge (and SQS itself) may send; nobody may use the queue without TLS; then the caller's statements,
    whose Resource defaults to the queue."""
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
            *({"Resource": queue_arn, **statement} for statement in extra_statements),
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
