"""Typed, documented arguments of the `Karpenter` component, and their validation.

Grouped like terraform-aws-eks `modules/karpenter` v21 (controller role, node role, access, queue, Helm), plus the
identity mode that module dropped (IRSA, needed on Fargate). `validate` runs before any resource is declared and
reports every problem at once, each naming the argument path.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

import karpy
from pulumi_karpy import documents, policy

VERSION: str = karpy.__version__
"""One version for the stack: package = chart version = appVersion = default image tag = default chart version."""

DEFAULT_IMAGE_REPOSITORY = "ghcr.io/karpy-dev/karpy"


class AccessMode(enum.StrEnum):
    """How nodes launched with the node role are allowed to join the cluster."""

    ACCESS_ENTRY = "access_entry"
    """An EKS access entry of type EC2_LINUX (or EC2_WINDOWS): clusters in API or API_AND_CONFIG_MAP mode."""
    AWS_AUTH = "aws_auth"
    """A `mapRoles` entry in kube-system/aws-auth: clusters still in CONFIG_MAP mode."""
    NONE = "none"
    """Nothing: the role already has access (e.g. the managed node group's role is reused)."""


@dataclass(frozen=True, slots=True)
class ControllerRoleArgs:
    """The controller's IAM role and its six upstream managed policies."""

    name: str | None = None
    """Explicit role name (≤ 64 chars); None = Pulumi auto-naming from the component name."""
    path: str = "/"
    permissions_boundary_arn: pulumi.Input[str] | None = None
    extra_statements: Sequence[Mapping[str, Any]] = ()
    """Appended as one more managed policy (`<name>-controller-extra`); validated before anything is declared."""
    extra_policy_arns: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """More managed policies to attach, keyed by a stable short name (the resource name suffix)."""
    ssm_parameter_arns: Sequence[str] = ()
    """Narrow ssm:GetParameter to these ARNs; empty = upstream's `parameter/aws/service/*` in the region."""


@dataclass(frozen=True, slots=True)
class NodeRoleArgs:
    """The role Karpenter passes to the instances it launches."""

    create: bool = True
    """False = reuse `existing_arn` (e.g. the managed node group's role); then set access.mode=none."""
    existing_arn: pulumi.Input[str] | None = None
    name: str | None = None
    """Explicit name (≤ 64 chars, predictable for `EC2NodeClass.spec.role`); None = auto-naming."""
    path: str = "/"
    permissions_boundary_arn: pulumi.Input[str] | None = None
    extra_policy_arns: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    ipv6: bool = False
    """IPv6 cluster: attach the CNI's IPv6 policy (created) instead of AmazonEKS_CNI_Policy."""
    create_instance_profile: bool = False
    """Karpenter ≥ 0.32 creates its own profiles from `spec.role`; set True for `spec.instanceProfile` users."""


@dataclass(frozen=True, slots=True)
class AccessArgs:
    mode: AccessMode = AccessMode.ACCESS_ENTRY
    access_entry_type: str = "EC2_LINUX"
    """EC2_LINUX or EC2_WINDOWS (STANDARD would be rejected for the node groups; upstream #7558)."""
    aws_auth_map_roles: Sequence[Mapping[str, Any]] = ()
    """AWS_AUTH mode only: the cluster's existing mapRoles entries. A ConfigMap key is replaced as a whole by a
    patch, so the component writes these followed by the node role's entry."""


@dataclass(frozen=True, slots=True)
class QueueArgs:
    enabled: bool = True
    """The SQS interruption queue and its five EventBridge rules (on by default, as upstream recommends)."""
    name: str | None = None
    """Explicit queue name (≤ 80 chars); None = auto-naming."""
    kms_master_key_id: pulumi.Input[str] | None = None
    """A customer-managed key whose key policy lets events.amazonaws.com use it; None = SSE-SQS.
    (EventBridge cannot deliver to a queue encrypted with the AWS-managed key: upstream #7209.)"""
    kms_data_key_reuse_period_seconds: int | None = None
    rule_name_prefix: str = "karpy-"


@dataclass(frozen=True, slots=True)
class HelmArgs:
    replicas: int = 2
    """Controller replicas; 2 with leader election (one active), as upstream."""
    resources: Mapping[str, Any] = field(
        default_factory=lambda: {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    )
    log_level: str = "info"
    values: Mapping[str, Any] = field(default_factory=dict)
    """Extra chart values, deep-merged *under* the values the component owns (cluster, queue, service account)."""
    image_repository: str = DEFAULT_IMAGE_REPOSITORY
    image_tag: str = VERSION
    chart_version: str = VERSION
    """Must equal the bundled charts' version (checked): the charts travel with this package."""
    charts_dir: str | None = None
    """Directory holding `karpy` and `karpy-crd`; None = KARPY_CHARTS_DIR, else the repository's `charts/`."""
    release_name: str = "karpy"
    create_namespace: bool = False
    timeout_seconds: int = 300


@dataclass(frozen=True, slots=True)
class DefaultNodePoolArgs:
    """An EC2NodeClass and NodePool to start from (upstream getting-started defaults)."""

    name: str = "default"
    discovery_tag_key: str = "karpenter.sh/discovery"
    discovery_tag_value: str | None = None
    """Subnets and security groups tagged `<key>=<value>` are selected; None = the cluster name."""
    ami_alias: str = "al2023@latest"
    capacity_types: Sequence[str] = ("on-demand", "spot")
    instance_categories: Sequence[str] = ("c", "m", "r")
    cpu_limit: str = "1000"
    consolidate_after: str = "1m"


@dataclass(frozen=True, slots=True)
class KarpenterArgs:
    """Everything the component needs; only `cluster_name` is required (and OIDC inputs for IRSA)."""

    cluster_name: pulumi.Input[str]
    cluster_endpoint: pulumi.Input[str] | None = None
    """API server URL for node user data; None = the controller discovers it (eks:DescribeCluster)."""
    identity_mode: documents.IdentityMode = documents.IdentityMode.POD_IDENTITY
    oidc_provider_arn: pulumi.Input[str] | None = None
    """IRSA: the cluster's IAM OIDC provider ARN."""
    oidc_issuer_url: pulumi.Input[str] | None = None
    """IRSA: the cluster's issuer URL (`https://oidc.eks.<region>.amazonaws.com/id/...`)."""
    namespace: str = "kube-system"
    service_account: str = "karpy"
    controller_role: ControllerRoleArgs = ControllerRoleArgs()
    node_role: NodeRoleArgs = NodeRoleArgs()
    access: AccessArgs = AccessArgs()
    queue: QueueArgs = QueueArgs()
    helm: HelmArgs = HelmArgs()
    default_node_pool: DefaultNodePoolArgs | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every AWS resource the component creates."""


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")


def validate(args: KarpenterArgs) -> list[str]:
    """Every problem with the argument combination, each prefixed by its path. Empty = fine."""
    problems: list[str] = []
    if isinstance(args.cluster_name, str) and not _CLUSTER_NAME.match(args.cluster_name):
        problems.append(f"cluster_name: {args.cluster_name!r} is not an EKS cluster name (1-100 letters/digits/-/_)")
    if isinstance(args.cluster_endpoint, str) and not args.cluster_endpoint.startswith("https://"):
        problems.append(f"cluster_endpoint: {args.cluster_endpoint!r} is not an https:// URL")
    mode = args.identity_mode
    if mode not in set(documents.IdentityMode):
        problems.append(f"identity_mode: {mode!r} is not one of {', '.join(documents.IdentityMode)}")
    if mode == documents.IdentityMode.IRSA:
        if args.oidc_provider_arn is None:
            problems.append("identity_mode 'irsa' needs oidc_provider_arn")
        if args.oidc_issuer_url is None:
            problems.append("identity_mode 'irsa' needs oidc_issuer_url")
    elif args.oidc_provider_arn is not None or args.oidc_issuer_url is not None:
        problems.append("oidc_provider_arn/oidc_issuer_url are only used with identity_mode 'irsa'")
    for label, value in (("namespace", args.namespace), ("service_account", args.service_account)):
        if not _K8S_NAME.match(value) or len(value) > 63:
            problems.append(f"{label}: {value!r} is not a Kubernetes name")
    problems += _validate_roles(args)
    problems += _validate_queue_and_helm(args)
    return problems


def _validate_roles(args: KarpenterArgs) -> list[str]:
    problems = policy.validate_extra_statements(args.controller_role.extra_statements)
    for label, name in (("controller_role.name", args.controller_role.name), ("node_role.name", args.node_role.name)):
        if name is not None and not re.match(r"^[\w+=,.@-]{1,64}$", name):
            problems.append(f"{label}: {name!r} is not an IAM role name (1-64 of letters, digits, +=,.@_-)")
    for label, path in (("controller_role.path", args.controller_role.path), ("node_role.path", args.node_role.path)):
        if not re.match(r"^/([\w+=,.@-]+/)*$", path):
            problems.append(f"{label}: {path!r} must start and end with '/'")
    node = args.node_role
    if node.create and node.existing_arn is not None:
        problems.append("node_role: existing_arn is set but create=True; set create=False to reuse a role")
    if not node.create and node.existing_arn is None:
        problems.append("node_role: create=False needs existing_arn")
    if not node.create and (node.extra_policy_arns or node.ipv6):
        problems.append("node_role: extra_policy_arns/ipv6 only apply to a role the component creates")
    if args.access.access_entry_type not in ("EC2_LINUX", "EC2_WINDOWS"):
        problems.append(f"access.access_entry_type: {args.access.access_entry_type!r} must be EC2_LINUX or EC2_WINDOWS")
    if args.access.aws_auth_map_roles and args.access.mode != AccessMode.AWS_AUTH:
        problems.append("access.aws_auth_map_roles is only used with access.mode 'aws_auth'")
    return problems


def _validate_queue_and_helm(args: KarpenterArgs) -> list[str]:
    problems = []
    queue = args.queue
    if queue.name is not None and not re.match(r"^[A-Za-z0-9_-]{1,80}$", queue.name):
        problems.append(f"queue.name: {queue.name!r} is not an SQS queue name (1-80 of letters, digits, - and _)")
    if queue.kms_data_key_reuse_period_seconds is not None and queue.kms_master_key_id is None:
        problems.append("queue.kms_data_key_reuse_period_seconds needs queue.kms_master_key_id")
    if not queue.enabled and (queue.name is not None or queue.kms_master_key_id is not None):
        problems.append("queue: name/kms_master_key_id are set but the queue is disabled")
    helm = args.helm
    if helm.replicas < 1:
        problems.append(f"helm.replicas: {helm.replicas} must be >= 1")
    if helm.log_level not in ("debug", "info", "warning", "error"):
        problems.append(f"helm.log_level: {helm.log_level!r} is not one of debug, info, warning, error")
    if helm.chart_version != VERSION:
        problems.append(f"helm.chart_version: {helm.chart_version!r} differs from the bundled charts ({VERSION})")
    if not _K8S_NAME.match(helm.release_name):
        problems.append(f"helm.release_name: {helm.release_name!r} is not a Helm release name")
    pool = args.default_node_pool
    if pool is not None and not _K8S_NAME.match(pool.name):
        problems.append(f"default_node_pool.name: {pool.name!r} is not a Kubernetes name")
    return problems
