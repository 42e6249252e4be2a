"""The `Karpenter` component's arguments: typed, documented dictionaries any Pulumi language can fill in.

They are `TypedDict`s with resolvable annotations (no `from __future__ import annotations` here) because Pulumi's
component analyzer (`pulumi.provider.experimental.analyzer`) infers the multi-language schema from them, attribute
docstrings included, and the component provider hands the component plain dictionaries. Python callers build them
the same way: `KarpenterArgs(cluster_name="demo", queue=QueueArgs(enabled=False))`. Defaults and validation live in
`pulumi_karpy.spec`. Grouped like terraform-aws-eks `modules/karpenter` v21, plus the IRSA identity mode that module
dropped (needed on Fargate) and the controller image.
"""

import enum
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import pulumi

import karpy

VERSION: str = karpy.__version__
"""One version for the stack: package = chart version = appVersion = default image tag = default chart version."""


class IdentityMode(enum.StrEnum):
    """How the controller's pods get AWS credentials."""

    IRSA = "irsa"
    """IAM roles for service accounts: an OIDC trust; needed on Fargate, where Pod Identity is not supported."""
    POD_IDENTITY = "pod_identity"
    """EKS Pod Identity: a `pods.eks.amazonaws.com` trust plus an association (needs the eks-pod-identity-agent)."""


class AccessMode(enum.StrEnum):
    """How nodes launched with the node role are allowed to join the cluster."""

    ACCESS_ENTRY = "access_entry"
    """An EKS access entry of type EC2_LINUX (or EC2_WINDOWS): clusters in API or API_AND_CONFIG_MAP mode."""
    AWS_AUTH = "aws_auth"
    """A `mapRoles` entry in kube-system/aws-auth: clusters still in CONFIG_MAP mode."""
    NONE = "none"
    """Nothing: the role already has access (e.g. the managed node group's role is reused)."""


class CrdMode(enum.StrEnum):
    """Who owns the CustomResourceDefinitions (nodepools, nodeclaims, ec2nodeclasses). Every mode keeps them, and so
    every stored NodePool, NodeClaim and EC2NodeClass, when the stack is destroyed (`helm.sh/resource-policy: keep`)."""

    INSTALL = "install"
    """The `<release>-crd` release creates them: a cluster without Karpenter."""
    ADOPT = "adopt"
    """They exist, installed by upstream's charts: they get the `<release>-crd` release's Helm ownership metadata
    (server-side patches), and the release then takes them over and keeps them current."""
    SKIP = "skip"
    """Someone else owns them (upstream's `karpenter-crd` release, a GitOps tool): the component installs none."""


class ControllerRoleArgs(TypedDict):
    """The controller's IAM role and its six upstream managed policies."""

    name: NotRequired[str]
    """Explicit role name (at most 64 characters); unset = Pulumi auto-naming from the component name."""
    path: NotRequired[str]
    """IAM path of the role and its policies; default "/"."""
    permissions_boundary_arn: NotRequired[pulumi.Input[str]]
    """Permissions boundary policy ARN for the role; unset = none."""
    extra_statements: NotRequired[Sequence[Mapping[str, Any]]]
    """IAM statements appended as one more managed policy (`<name>-controller-extra`); validated up front."""
    extra_policy_arns: NotRequired[Mapping[str, pulumi.Input[str]]]
    """More managed policies to attach, keyed by a stable short name (the resource name suffix)."""
    ssm_parameter_arns: NotRequired[Sequence[str]]
    """Narrow ssm:GetParameter to these ARNs; unset = upstream's `parameter/aws/service/*` in the region."""


class NodeRoleArgs(TypedDict):
    """The role Karpenter passes to the instances it launches."""

    create: NotRequired[bool]
    """Default true. False = reuse `existing_arn` (e.g. the managed node group's role); then set access.mode=none."""
    existing_arn: NotRequired[pulumi.Input[str]]
    """ARN of the role to reuse when `create` is false."""
    name: NotRequired[str]
    """Explicit name (at most 64 characters, predictable for `EC2NodeClass.spec.role`); unset = auto-naming."""
    path: NotRequired[str]
    """IAM path of the role; default "/"."""
    permissions_boundary_arn: NotRequired[pulumi.Input[str]]
    """Permissions boundary policy ARN for the role; unset = none."""
    extra_policy_arns: NotRequired[Mapping[str, pulumi.Input[str]]]
    """More managed policies for the nodes, keyed by a stable short name (the resource name suffix)."""
    ipv6: NotRequired[bool]
    """IPv6 cluster: attach the CNI's IPv6 policy (created) instead of AmazonEKS_CNI_Policy. Default false."""
    create_instance_profile: NotRequired[bool]
    """Default false: Karpenter creates its own profiles from `spec.role`; true for `spec.instanceProfile` users."""


class AccessArgs(TypedDict):
    """How the nodes' role gets into the cluster."""

    mode: NotRequired[AccessMode]
    """access_entry (default), aws_auth (CONFIG_MAP clusters) or none."""
    access_entry_type: NotRequired[str]
    """EC2_LINUX (default) or EC2_WINDOWS (STANDARD is rejected for node roles; upstream #7558)."""
    aws_auth_map_roles: NotRequired[Sequence[Mapping[str, Any]]]
    """aws_auth mode only: the cluster's existing mapRoles entries. A ConfigMap key is replaced as a whole by a
    patch, so the component writes these followed by the node role's entry."""


class QueueArgs(TypedDict):
    """The SQS interruption queue and the EventBridge rules that feed it."""

    enabled: NotRequired[bool]
    """The queue and its five rules; default true, as upstream recommends."""
    name: NotRequired[str]
    """Explicit queue name (at most 80 characters); unset = auto-naming, so two stacks never collide."""
    kms_master_key_id: NotRequired[pulumi.Input[str]]
    """A customer-managed KMS key (ID or ARN) whose key policy lets events.amazonaws.com use it; the controller is
    granted kms:Decrypt on it. Unset = SSE-SQS. (EventBridge cannot deliver to a queue encrypted with the
    AWS-managed key: upstream #7209.)"""
    kms_data_key_reuse_period_seconds: NotRequired[int]
    """How long SQS reuses a data key before calling KMS again (60-86400 s); only with kms_master_key_id."""
    rule_name_prefix: NotRequired[str]
    """Prefix of the rules' generated names (`<prefix><Rule>-<unique suffix>`); default "karpy-"."""
    policy_statements: NotRequired[Sequence[Mapping[str, Any]]]
    """More statements for the queue policy (e.g. another account's EventBridge bus); each needs Effect, Action
    and Principal, and its Resource defaults to the queue."""


class HelmArgs(TypedDict):
    """The controller's Helm release (the CRD release uses the same namespace and timeout)."""

    replicas: NotRequired[int]
    """Controller replicas; default 2 with leader election (one active), as upstream."""
    resources: NotRequired[Mapping[str, Any]]
    """Controller container resources; default 1 CPU / 1Gi with requests = limits, upstream's recommendation."""
    log_level: NotRequired[str]
    """debug, info (default), warning or error."""
    values: NotRequired[pulumi.Input[Mapping[str, Any]]]
    """More chart values (upstream's keys), deep-merged under the values the component owns (cluster, region,
    queue, service account, image). Outputs may stand anywhere in them (a CA bundle, another resource's labels),
    or for the whole mapping."""
    chart_version: NotRequired[str]
    """Must equal the bundled charts' version (checked; the default): the charts travel with this package."""
    charts_dir: NotRequired[str]
    """Directory holding `karpy` and `karpy-crd`; unset = KARPY_CHARTS_DIR, else the charts inside the package."""
    release_name: NotRequired[str]
    """Helm release name of the controller (the CRD release is `<name>-crd`); default "karpy"."""
    create_namespace: NotRequired[bool]
    """Create the namespace if it is missing (Helm's `--create-namespace`, on both releases); default: true for any
    namespace but kube-system, which every cluster has."""
    timeout_seconds: NotRequired[int]
    """How long Helm waits for the controller to become ready (its /readyz includes AWS accepting its identity), and
    on destroy for the NodeClaims to go; default 300."""
    check: NotRequired[bool]
    """Default true: run `karpy check` (the controller's AWS start-up checks: region, identity, EC2, interruption
    queue) as a Job with the controller's image, ServiceAccount and scheduling values beside the release, so a
    refused identity fails `pulumi up` with AWS's reason. False: declare no Job (the release still waits)."""


class ImageArgs(TypedDict):
    """The controller image: built from this package's Dockerfile into an ECR repository the stack owns, or given."""

    reference: NotRequired[pulumi.Input[str]]
    """Use this image (`repo@sha256:...` or `repo:tag`) and build nothing; unset = build and push (the default)."""
    context: NotRequired[str]
    """Build context holding the Dockerfile; unset = the source tree this package was installed from."""
    platforms: NotRequired[Sequence[str]]
    """Platforms to build (linux/amd64, linux/arm64). Default one: the architecture helm.values.nodeSelector pins
    (kubernetes.io/arch), else linux/amd64, and the controller is pinned to it; a stock Docker engine builds one
    platform. Both need the containerd image store and QEMU (or a builder per architecture)."""
    repository_name: NotRequired[str]
    """Explicit ECR repository name; unset = auto-naming from the component name."""


class DefaultNodePoolArgs(TypedDict):
    """An EC2NodeClass and NodePool to start from (upstream getting-started defaults), owned by the stack."""

    name: NotRequired[str]
    """Name of both objects; default "default"."""
    discovery_tag_key: NotRequired[str]
    """Tag key selecting subnets and security groups; default karpenter.sh/discovery."""
    discovery_tag_value: NotRequired[str]
    """Tag value selecting subnets and security groups; unset = the cluster name."""
    ami_alias: NotRequired[str]
    """EC2NodeClass amiSelectorTerms alias; default al2023@latest."""
    capacity_types: NotRequired[Sequence[str]]
    """karpenter.sh/capacity-type values; default on-demand and spot."""
    instance_categories: NotRequired[Sequence[str]]
    """karpenter.k8s.aws/instance-category values; default c, m and r."""
    cpu_limit: NotRequired[str]
    """NodePool limits.cpu; default "1000"."""
    consolidate_after: NotRequired[str]
    """NodePool disruption.consolidateAfter; default "1m"."""
    plan_preview: NotRequired[bool]
    """Show in `pulumi preview` what a change of these objects does to the running nodes (`karpy plan` against the
    cluster of $KUBECONFIG, read-only, at most 20 s, never failing the preview); default true."""


class KarpenterArgs(TypedDict):
    """Everything the component needs; only `cluster_name` is required (and the OIDC inputs for IRSA)."""

    cluster_name: pulumi.Input[str]
    """Name of the existing EKS cluster."""
    cluster_endpoint: NotRequired[pulumi.Input[str]]
    """API server URL for node user data; unset = the controller discovers it (eks:DescribeCluster)."""
    identity_mode: NotRequired[IdentityMode]
    """pod_identity (default) or irsa."""
    oidc_provider_arn: NotRequired[pulumi.Input[str]]
    """IRSA: the cluster's IAM OIDC provider ARN."""
    oidc_issuer_url: NotRequired[pulumi.Input[str]]
    """IRSA: the cluster's issuer URL (`https://oidc.eks.<region>.amazonaws.com/id/...`)."""
    create_pod_identity_agent: NotRequired[bool]
    """pod_identity: also install the eks-pod-identity-agent add-on (default false: most clusters have it, and
    creating an add-on that exists fails). Without the agent the controller gets no credentials."""
    namespace: NotRequired[str]
    """Namespace of both releases; default kube-system."""
    service_account: NotRequired[str]
    """The controller's ServiceAccount (the Pod Identity association / IRSA trust names it); default karpy."""
    controller_role: NotRequired[ControllerRoleArgs]
    """The controller's IAM role."""
    node_role: NotRequired[NodeRoleArgs]
    """The nodes' IAM role."""
    access: NotRequired[AccessArgs]
    """How the nodes' role gets into the cluster."""
    queue: NotRequired[QueueArgs]
    """The interruption queue and rules."""
    helm: NotRequired[HelmArgs]
    """The Helm releases."""
    image: NotRequired[ImageArgs]
    """The controller image."""
    default_node_pool: NotRequired[DefaultNodePoolArgs]
    """Declare a default EC2NodeClass and NodePool in the stack; unset = none. Being stack resources that depend on
    the release, they are deleted first on `pulumi destroy`, while the controller still runs to drain their nodes."""
    tags: NotRequired[Mapping[str, pulumi.Input[str]]]
    """Tags on every AWS resource the component creates."""
    crds: NotRequired[CrdMode]
    """How the CRDs are provided: install (default), adopt upstream's, or skip (see `CrdMode`)."""
