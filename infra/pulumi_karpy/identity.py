"""IAM and cluster access: the node role, the controller role and its policies, how each gets into the cluster.

Every resource here must exist before the controller starts (`Identity.resources`): a pod admitted before its Pod
Identity association or policy attachments runs without credentials until restarted, and nodes launched before the
node role's access entry never join. On `pulumi destroy` the same dependencies keep all of them until the release
(and the NodePools it drains before it) are gone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import documents, policy
from pulumi_karpy import scope as pulumi_karpy_scope

POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"


@dataclass(frozen=True, slots=True)
class NodeRole:
    arn: pulumi.Output[str]
    name: pulumi.Output[str]
    resources: list[pulumi.Resource] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ControllerRole:
    role: aws.iam.Role
    resources: list[pulumi.Resource] = field(default_factory=list)
    """The role, its policies and attachments, the Pod Identity association and agent add-on."""


def node_role(scope: pulumi_karpy_scope.Scope) -> NodeRole:
    node = scope.spec.node_role
    if not node.create:
        arn = pulumi.Output.from_input(node.existing_arn).apply(lambda a: str(a))
        return NodeRole(arn=arn, name=arn.apply(lambda a: a.rsplit("/", 1)[-1]))
    role = aws.iam.Role(
        f"{scope.name}-node",
        name=node.name,
        path=node.path,
        permissions_boundary=node.permissions_boundary_arn,
        assume_role_policy=scope.partition.apply(lambda p: json.dumps(documents.node_trust_policy(p))),
        description=scope.cluster_name.apply(lambda c: f"Nodes launched by karpy for EKS cluster {c}"),
        tags=dict(scope.tags),
        opts=scope.child,
    )
    resources: list[pulumi.Resource] = [role]
    # Static keys: the managed policy ARNs are known from the partition, so names stay stable (TF PR #2962).
    for key in documents.node_managed_policy_arns("aws", ipv6=node.ipv6):
        resources.append(
            aws.iam.RolePolicyAttachment(
                f"{scope.name}-node-{key}",
                role=role.name,
                policy_arn=scope.partition.apply(
                    lambda p, k=key: documents.node_managed_policy_arns(p, ipv6=node.ipv6)[k]  # type: ignore[misc]
                ),
                opts=scope.child,
            )
        )
    if node.ipv6:
        ipv6 = aws.iam.Policy(
            f"{scope.name}-node-cni-ipv6",
            policy=scope.partition.apply(lambda p: json.dumps(documents.node_cni_ipv6_policy(p))),
            tags=dict(scope.tags),
            opts=scope.child,
        )
        resources.append(_attach(scope, "node-cni-ipv6", role, ipv6.arn))
    resources += [
        _attach(scope, f"node-extra-{key}", role, extra_arn) for key, extra_arn in node.extra_policy_arns.items()
    ]
    return NodeRole(arn=role.arn, name=role.name, resources=resources)


def instance_profile(scope: pulumi_karpy_scope.Scope, node: NodeRole) -> aws.iam.InstanceProfile | None:
    if not scope.spec.node_role.create_instance_profile:
        return None
    return aws.iam.InstanceProfile(
        f"{scope.name}-instance-profile",
        role=node.name,
        path=scope.spec.node_role.path,
        tags=dict(scope.tags),
        opts=scope.after(*node.resources),
    )


def controller_role(
    scope: pulumi_karpy_scope.Scope, *, node_role_arn: pulumi.Output[str], queue: aws.sqs.Queue | None
) -> ControllerRole:
    spec = scope.spec.controller_role
    role = aws.iam.Role(
        f"{scope.name}-controller",
        name=spec.name,
        path=spec.path,
        permissions_boundary=spec.permissions_boundary_arn,
        assume_role_policy=_trust_policy(scope.spec),
        description=scope.cluster_name.apply(lambda c: f"karpy controller for EKS cluster {c}"),
        tags=dict(scope.tags),
        opts=scope.child,
    )
    resources: list[pulumi.Resource] = [role]
    kms = scope.spec.queue.kms_master_key_id if queue is not None else None
    context = pulumi.Output.all(
        scope.partition, scope.region, scope.account, scope.cluster_name, node_role_arn,
        queue.arn if queue is not None else None, kms,
    ).apply(
        lambda v: policy.PolicyContext(
            partition=v[0],
            region=v[1],
            account_id=v[2],
            cluster_name=v[3],
            node_role_arn=v[4],
            queue_arn=v[5],
            ssm_parameter_arns=tuple(spec.ssm_parameter_arns),
            queue_kms_key_arn=(
                policy.kms_key_arn(v[6], partition=v[0], region=v[1], account_id=v[2]) if v[6] else None
            ),
        )
    )  # fmt: skip
    documents_by_group = context.apply(policy.build_controller_policies)
    groups = [g for g in policy.PolicyGroup if queue is not None or g != policy.PolicyGroup.INTERRUPTION]
    for group in groups:
        slug = _kebab(group.value)
        managed = aws.iam.Policy(
            f"{scope.name}-controller-{slug}",
            description=scope.cluster_name.apply(
                lambda c, g=group: (
                    f"karpy controller ({g}, upstream Karpenter {policy.KARPENTER_POLICY_VERSION}) for {c}"
                )  # type: ignore[misc]
            ),
            path=spec.path,
            policy=documents_by_group.apply(lambda docs, g=group: json.dumps(docs[g])),  # type: ignore[misc]
            tags=dict(scope.tags),
            opts=scope.child,
        )
        resources += [managed, _attach(scope, f"controller-{slug}", role, managed.arn)]
    if spec.extra_statements:
        extra = aws.iam.Policy(
            f"{scope.name}-controller-extra",
            path=spec.path,
            # Resolved first: a statement may name another resource's ARN (an Output) anywhere inside.
            policy=pulumi.Output.from_input([dict(s) for s in spec.extra_statements]).apply(
                lambda statements: json.dumps(policy.document(statements))
            ),
            tags=dict(scope.tags),
            opts=scope.child,
        )
        resources += [extra, _attach(scope, "controller-extra", role, extra.arn)]
    resources += [_attach(scope, f"controller-attach-{key}", role, arn) for key, arn in spec.extra_policy_arns.items()]
    if scope.spec.identity_mode == pulumi_karpy_args.IdentityMode.POD_IDENTITY:
        resources += _pod_identity(scope, role)
    return ControllerRole(role=role, resources=resources)


def _attach(
    scope: pulumi_karpy_scope.Scope, suffix: str, role: aws.iam.Role, arn: pulumi.Input[str]
) -> pulumi.Resource:
    return aws.iam.RolePolicyAttachment(f"{scope.name}-{suffix}", role=role.name, policy_arn=arn, opts=scope.child)


def _pod_identity(scope: pulumi_karpy_scope.Scope, role: aws.iam.Role) -> list[pulumi.Resource]:
    found: list[pulumi.Resource] = []
    if scope.spec.create_pod_identity_agent:
        found.append(
            aws.eks.Addon(
                f"{scope.name}-pod-identity-agent",
                cluster_name=scope.cluster_name,
                addon_name=POD_IDENTITY_AGENT_ADDON,
                tags=dict(scope.tags),
                opts=scope.child,
            )
        )
    found.append(
        aws.eks.PodIdentityAssociation(
            f"{scope.name}-pod-identity",
            cluster_name=scope.cluster_name,
            namespace=scope.spec.namespace,
            service_account=scope.spec.service_account,
            role_arn=role.arn,
            tags=dict(scope.tags),
            opts=scope.child,
        )
    )
    return found


def _trust_policy(spec: Any) -> pulumi.Output[str]:
    if spec.identity_mode == pulumi_karpy_args.IdentityMode.POD_IDENTITY:
        return pulumi.Output.from_input(json.dumps(documents.pod_identity_trust_policy()))
    return pulumi.Output.all(spec.oidc_provider_arn, spec.oidc_issuer_url).apply(
        lambda v: json.dumps(
            documents.irsa_trust_policy(
                oidc_provider_arn=v[0],
                oidc_issuer=v[1],
                namespace=spec.namespace,
                service_account=spec.service_account,
            )
        )
    )


def node_access(
    scope: pulumi_karpy_scope.Scope, *, node: NodeRole, queue_policy: aws.sqs.QueuePolicy | None
) -> pulumi.Resource | None:
    access = scope.spec.access
    if access.mode == pulumi_karpy_args.AccessMode.ACCESS_ENTRY:
        # terraform-aws-eks waits on the queue policy first: a just-created role is not yet visible to EKS.
        return aws.eks.AccessEntry(
            f"{scope.name}-node-access",
            cluster_name=scope.cluster_name,
            principal_arn=node.arn,
            type=access.access_entry_type,
            tags=dict(scope.tags),
            opts=scope.after(queue_policy),
        )
    if access.mode == pulumi_karpy_args.AccessMode.AWS_AUTH:
        existing = pulumi.Output.from_input([dict(e) for e in access.aws_auth_map_roles])  # Outputs inside resolved
        map_roles = pulumi.Output.all(node.arn, existing).apply(
            lambda resolved: aws_auth_map_roles(
                resolved[1], resolved[0], windows=access.access_entry_type == "EC2_WINDOWS"
            )
        )
        return k8s.core.v1.ConfigMapPatch(
            f"{scope.name}-aws-auth",
            metadata={"name": "aws-auth", "namespace": "kube-system"},
            data={"mapRoles": map_roles},
            opts=scope.child,
        )
    return None


def aws_auth_map_roles(existing: Sequence[Mapping[str, Any]], node_role_arn: str, *, windows: bool) -> str:
    groups = ["system:bootstrappers", "system:nodes", *(["eks:kube-proxy-windows"] if windows else [])]
    entry = {"rolearn": node_role_arn, "username": "system:node:{{EC2PrivateDNSName}}", "groups": groups}
    kept = [dict(e) for e in existing if e.get("rolearn") != node_role_arn]
    return str(yaml.safe_dump([*kept, entry], sort_keys=False))


def _kebab(camel: str) -> str:
    """`NodeLifecycle` → `node-lifecycle`, `IAMIntegration` → `iam-integration`."""
    out: list[str] = []
    for i, c in enumerate(camel):
        if c.isupper() and i and (not camel[i - 1].isupper() or (i + 1 < len(camel) and camel[i + 1].islower())):
            out.append("-")
        out.append(c.lower())
    return "".join(out)
