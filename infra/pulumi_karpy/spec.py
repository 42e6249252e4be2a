"""The component's arguments resolved: defaults filled in, every problem found before any resource is declared.

`resolve` turns the `args` dictionaries (from Python or, through the component provider, from any language) into
frozen dataclasses, one per group, whose fields are exactly the `TypedDict` keys (a test keeps the two in step).
`validate` reports every problem at once, each naming its argument path.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import documents, policy

SUPPORTED_PLATFORMS = ("linux/amd64", "linux/arm64")
DEFAULT_PLATFORM = "linux/amd64"
"""What the image is built for when neither `image.platforms` nor the controller's nodeSelector says: one platform,
which a stock Docker engine builds (a multi-platform build needs the containerd image store, and QEMU for the
foreign architecture)."""
ARCH_LABEL = "kubernetes.io/arch"
DEFAULT_NAMESPACE = "kube-system"


@dataclass(frozen=True, slots=True)
class ControllerRole:
    name: str | None = None
    path: str = "/"
    permissions_boundary_arn: pulumi.Input[str] | None = None
    extra_statements: Sequence[Mapping[str, Any]] = ()
    extra_policy_arns: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    ssm_parameter_arns: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class NodeRole:
    create: bool = True
    existing_arn: pulumi.Input[str] | None = None
    name: str | None = None
    path: str = "/"
    permissions_boundary_arn: pulumi.Input[str] | None = None
    extra_policy_arns: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    ipv6: bool = False
    create_instance_profile: bool = False


@dataclass(frozen=True, slots=True)
class Access:
    mode: pulumi_karpy_args.AccessMode = pulumi_karpy_args.AccessMode.ACCESS_ENTRY
    access_entry_type: str = "EC2_LINUX"
    aws_auth_map_roles: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class Queue:
    enabled: bool = True
    name: str | None = None
    kms_master_key_id: pulumi.Input[str] | None = None
    kms_data_key_reuse_period_seconds: int | None = None
    rule_name_prefix: str = "karpy-"
    policy_statements: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class Helm:
    replicas: int = 2
    resources: Mapping[str, Any] = field(
        default_factory=lambda: {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    )
    log_level: str = "info"
    values: pulumi.Input[Mapping[str, Any]] = field(default_factory=dict)
    chart_version: str = pulumi_karpy_args.VERSION
    charts_dir: str | None = None
    release_name: str = "karpy"
    create_namespace: bool | None = None
    """None = create any namespace but kube-system (see `Karpenter.creates_namespace`)."""
    timeout_seconds: int = 300
    check: bool = True


@dataclass(frozen=True, slots=True)
class Image:
    reference: pulumi.Input[str] | None = None
    context: str | None = None
    platforms: Sequence[str] = ()
    repository_name: str | None = None

    @property
    def build(self) -> bool:
        return self.reference is None


@dataclass(frozen=True, slots=True)
class DefaultNodePool:
    name: str = "default"
    discovery_tag_key: str = "karpenter.sh/discovery"
    discovery_tag_value: str | None = None
    ami_alias: str = "al2023@latest"
    capacity_types: Sequence[str] = ("on-demand", "spot")
    instance_categories: Sequence[str] = ("c", "m", "r")
    cpu_limit: str = "1000"
    consolidate_after: str = "1m"
    plan_preview: bool = True


@dataclass(frozen=True, slots=True)
class Karpenter:
    cluster_name: pulumi.Input[str]
    cluster_endpoint: pulumi.Input[str] | None = None
    identity_mode: pulumi_karpy_args.IdentityMode = pulumi_karpy_args.IdentityMode.POD_IDENTITY
    oidc_provider_arn: pulumi.Input[str] | None = None
    oidc_issuer_url: pulumi.Input[str] | None = None
    create_pod_identity_agent: bool = False
    namespace: str = DEFAULT_NAMESPACE
    service_account: str = "karpy"
    controller_role: ControllerRole = ControllerRole()
    node_role: NodeRole = NodeRole()
    access: Access = Access()
    queue: Queue = Queue()
    helm: Helm = Helm()
    image: Image = Image()
    default_node_pool: DefaultNodePool | None = None
    tags: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    crds: pulumi_karpy_args.CrdMode = pulumi_karpy_args.CrdMode.INSTALL

    @property
    def creates_namespace(self) -> bool:
        """Whether the releases create their namespace: as asked, else every namespace but kube-system (which every
        cluster has), so `namespace="karpy"` alone works on a cluster where it does not exist yet."""
        if self.helm.create_namespace is not None:
            return self.helm.create_namespace
        return self.namespace != DEFAULT_NAMESPACE


GROUPS: Mapping[str, type[Any]] = {
    "controller_role": ControllerRole,
    "node_role": NodeRole,
    "access": Access,
    "queue": Queue,
    "helm": Helm,
    "image": Image,
    "default_node_pool": DefaultNodePool,
}
"""The nested argument groups and the dataclass each resolves to."""

SPEC_OF_ARGS: Mapping[type[Any], type[Any]] = {
    pulumi_karpy_args.KarpenterArgs: Karpenter,
    pulumi_karpy_args.ControllerRoleArgs: ControllerRole,
    pulumi_karpy_args.NodeRoleArgs: NodeRole,
    pulumi_karpy_args.AccessArgs: Access,
    pulumi_karpy_args.QueueArgs: Queue,
    pulumi_karpy_args.HelmArgs: Helm,
    pulumi_karpy_args.ImageArgs: Image,
    pulumi_karpy_args.DefaultNodePoolArgs: DefaultNodePool,
}
"""Each public TypedDict and the dataclass it resolves to: the same keys (tests/infra checks it)."""


class InvalidArguments(ValueError):
    """Arguments that cannot be deployed; the message lists every problem, each naming its argument path."""


def resolve(raw: Mapping[str, Any]) -> Karpenter:
    """Defaults filled in, enums parsed; raises `InvalidArguments` on unknown keys, wrong shapes or bad enum values."""
    problems: list[str] = []
    top = _fields(Karpenter, raw, "", problems)
    _parse_enum(top, "identity_mode", pulumi_karpy_args.IdentityMode, "", problems)
    _parse_enum(top, "crds", pulumi_karpy_args.CrdMode, "", problems)
    for key, group in GROUPS.items():
        if key in top:
            values = _fields(group, top[key], f"{key}.", problems)
            if group is Access:
                _parse_enum(values, "mode", pulumi_karpy_args.AccessMode, "access.", problems)
            top[key] = group(**values)
    if "cluster_name" not in top:
        problems.append("cluster_name is required")
    if problems:
        raise InvalidArguments("\n".join(problems))
    return Karpenter(**top)


def _parse_enum(
    values: dict[str, Any], key: str, enum_type: type[enum.StrEnum], prefix: str, problems: list[str]
) -> None:
    if key in values and not isinstance(values[key], enum_type):
        try:
            values[key] = enum_type(values[key])
        except ValueError:
            problems.append(f"{prefix}{key}: {values[key]!r} is not one of {', '.join(enum_type)}")


def _fields(cls: type[Any], raw: Any, prefix: str, problems: list[str]) -> dict[str, Any]:
    if dataclasses.is_dataclass(raw) and isinstance(raw, cls):
        return {f.name: getattr(raw, f.name) for f in dataclasses.fields(raw)}
    if not isinstance(raw, Mapping):
        problems.append(f"{prefix.rstrip('.') or 'args'}: expected a mapping, got {type(raw).__name__}")
        return {}
    known = {f.name for f in dataclasses.fields(cls)}
    problems += [f"{prefix}{key}: unknown argument" for key in raw if key not in known]
    # An explicit None means "unset", as an absent key does (other languages send nulls for optional inputs).
    return {key: value for key, value in raw.items() if key in known and value is not None}


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")


def validate(spec: Karpenter) -> list[str]:
    """Every problem with the argument combination, each prefixed by its path. Empty = fine."""
    problems: list[str] = []
    if isinstance(spec.cluster_name, str) and not _CLUSTER_NAME.match(spec.cluster_name):
        problems.append(f"cluster_name: {spec.cluster_name!r} is not an EKS cluster name (1-100 letters/digits/-/_)")
    if isinstance(spec.cluster_endpoint, str) and not spec.cluster_endpoint.startswith("https://"):
        problems.append(f"cluster_endpoint: {spec.cluster_endpoint!r} is not an https:// URL")
    if spec.identity_mode == pulumi_karpy_args.IdentityMode.IRSA:
        if spec.oidc_provider_arn is None:
            problems.append("identity_mode 'irsa' needs oidc_provider_arn")
        if spec.oidc_issuer_url is None:
            problems.append("identity_mode 'irsa' needs oidc_issuer_url")
        if spec.create_pod_identity_agent:
            problems.append("create_pod_identity_agent is only used with identity_mode 'pod_identity'")
    elif spec.oidc_provider_arn is not None or spec.oidc_issuer_url is not None:
        problems.append("oidc_provider_arn/oidc_issuer_url are only used with identity_mode 'irsa'")
    for label, value in (("namespace", spec.namespace), ("service_account", spec.service_account)):
        if not _K8S_NAME.match(value) or len(value) > 63:
            problems.append(f"{label}: {value!r} is not a Kubernetes name")
    return problems + _roles(spec) + _queue(spec.queue) + _helm_and_image(spec)


def _roles(spec: Karpenter) -> list[str]:
    problems = policy.validate_extra_statements(spec.controller_role.extra_statements)
    for label, name in (("controller_role.name", spec.controller_role.name), ("node_role.name", spec.node_role.name)):
        if name is not None and not re.match(r"^[\w+=,.@-]{1,64}$", name):
            problems.append(f"{label}: {name!r} is not an IAM role name (1-64 of letters, digits, +=,.@_-)")
    for label, path in (("controller_role.path", spec.controller_role.path), ("node_role.path", spec.node_role.path)):
        if not re.match(r"^/([\w+=,.@-]+/)*$", path):
            problems.append(f"{label}: {path!r} must start and end with '/'")
    node = spec.node_role
    if node.create and node.existing_arn is not None:
        problems.append("node_role: existing_arn is set but create=True; set create=False to reuse a role")
    if not node.create and node.existing_arn is None:
        problems.append("node_role: create=False needs existing_arn")
    # Two attachments of one policy to one role are one in IAM: deleting either detaches it for both.
    attached = {arn.split(":", 5)[-1] for arn in documents.node_managed_policy_arns("aws", ipv6=node.ipv6).values()}
    problems += [
        f"node_role.extra_policy_arns.{key}: {arn!r} is one of the policies the node role already gets"
        for key, arn in node.extra_policy_arns.items()
        if isinstance(arn, str) and arn.split(":", 5)[-1] in attached
    ]
    if not node.create and (node.extra_policy_arns or node.ipv6):
        problems.append("node_role: extra_policy_arns/ipv6 only apply to a role the component creates")
    if spec.access.access_entry_type not in ("EC2_LINUX", "EC2_WINDOWS"):
        problems.append(f"access.access_entry_type: {spec.access.access_entry_type!r} must be EC2_LINUX or EC2_WINDOWS")
    if spec.access.aws_auth_map_roles and spec.access.mode != pulumi_karpy_args.AccessMode.AWS_AUTH:
        problems.append("access.aws_auth_map_roles is only used with access.mode 'aws_auth'")
    return problems


def _queue(queue: Queue) -> list[str]:
    problems = []
    if queue.name is not None and not re.match(r"^[A-Za-z0-9_-]{1,80}$", queue.name):
        problems.append(f"queue.name: {queue.name!r} is not an SQS queue name (1-80 of letters, digits, - and _)")
    if queue.kms_data_key_reuse_period_seconds is not None:
        if queue.kms_master_key_id is None:
            problems.append("queue.kms_data_key_reuse_period_seconds needs queue.kms_master_key_id")
        elif not 60 <= queue.kms_data_key_reuse_period_seconds <= 86400:
            problems.append("queue.kms_data_key_reuse_period_seconds must be within 60..86400")
    if isinstance(queue.kms_master_key_id, str) and "alias/" in queue.kms_master_key_id:
        problems.append(
            "queue.kms_master_key_id: give the key's ID or ARN, not an alias (kms:Decrypt is granted on it)"
        )
    if not queue.enabled and (queue.name is not None or queue.kms_master_key_id is not None or queue.policy_statements):
        problems.append("queue: name/kms_master_key_id/policy_statements are set but the queue is disabled")
    # The generated name is the prefix plus 26 characters, within EventBridge's 64; the longest rule key is 14.
    if not re.match(r"^[\w.-]{0,23}$", queue.rule_name_prefix):
        problems.append(
            f"queue.rule_name_prefix: {queue.rule_name_prefix!r} must be at most 23 of letters, digits, .-_"
        )
    problems += policy.validate_queue_statements(queue.policy_statements)
    return problems


def _helm_and_image(spec: Karpenter) -> list[str]:
    problems = []
    helm = spec.helm
    if helm.replicas < 1:
        problems.append(f"helm.replicas: {helm.replicas} must be >= 1")
    if helm.timeout_seconds < 60:
        problems.append(
            f"helm.timeout_seconds: {helm.timeout_seconds} must be >= 60 (the controller's start, and on "
            "destroy the teardown of every NodeClaim, take that long)"
        )
    if helm.log_level not in ("debug", "info", "warning", "error"):
        problems.append(f"helm.log_level: {helm.log_level!r} is not one of debug, info, warning, error")
    if helm.chart_version != pulumi_karpy_args.VERSION:
        problems.append(
            f"helm.chart_version: {helm.chart_version!r} differs from the bundled charts ({pulumi_karpy_args.VERSION})"
        )
    if not _K8S_NAME.match(helm.release_name):
        problems.append(f"helm.release_name: {helm.release_name!r} is not a Helm release name")
    image = spec.image
    platforms = build_platforms(spec)
    unknown = [p for p in platforms if p not in SUPPORTED_PLATFORMS]
    if unknown and (image.build or image.platforms):
        where = "image.platforms" if image.platforms else f"helm.values.nodeSelector {ARCH_LABEL}"
        problems.append(f"{where}: {', '.join(unknown)} is not one of {', '.join(SUPPORTED_PLATFORMS)}")
    arch = node_selector_arch(helm.values)
    if image.build and arch is not None and f"linux/{arch}" not in platforms:
        problems.append(
            f"image.platforms: {platforms!r} has no linux/{arch}, the controller's nodes"
            f" (helm.values.nodeSelector {ARCH_LABEL})"
        )
    if not image.build and (image.context is not None or image.repository_name is not None):
        problems.append("image: context/repository_name build an image; they cannot be combined with reference")
    if image.repository_name is not None and not re.match(r"^[a-z0-9]+([._/-][a-z0-9]+)*$", image.repository_name):
        problems.append(f"image.repository_name: {image.repository_name!r} is not an ECR repository name")
    pool = spec.default_node_pool
    if pool is not None and not _K8S_NAME.match(pool.name):
        problems.append(f"default_node_pool.name: {pool.name!r} is not a Kubernetes name")
    return problems


def node_selector_arch(values: object) -> str | None:
    """The architecture the controller's nodeSelector pins, when the values, the selector and the architecture are
    plain (an Output is only known after the image must be declared: `image.platforms` then says what to build)."""
    if not isinstance(values, Mapping):
        return None
    selector = values.get("nodeSelector")
    arch = selector.get(ARCH_LABEL) if isinstance(selector, Mapping) else None
    return arch if isinstance(arch, str) else None


def build_platforms(spec: Karpenter) -> list[str]:
    """The platforms the image is built for: `image.platforms` if given; else the one the controller's nodes are
    (helm.values.nodeSelector kubernetes.io/arch); else linux/amd64."""
    if spec.image.platforms:
        return list(spec.image.platforms)
    arch = node_selector_arch(spec.helm.values)
    return [f"linux/{arch}"] if arch is not None else [DEFAULT_PLATFORM]


def pinned_arch(spec: Karpenter) -> str | None:
    """A single-platform image runs only on nodes of its architecture: the controller is pinned to it there."""
    platforms = build_platforms(spec)
    if not spec.image.build or len(platforms) != 1:
        return None
    return platforms[0].removeprefix("linux/")
