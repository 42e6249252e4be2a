"""`Karpenter`: the whole karpy deployment on an existing EKS cluster as one component (`karpy:index:Karpenter`).

Children are named `f"{name}-<role>"` with `parent=self`, so the AWS and Kubernetes providers the caller passes in
`opts.providers` are inherited; the component never builds a provider or a kubeconfig itself. Arguments are
validated before anything is declared; resources are never declared inside `.apply()`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from pulumi_karpy import args as args_
from pulumi_karpy import charts, defaults, documents, policy

TYPE_TOKEN = "karpy:index:Karpenter"


class Karpenter(pulumi.ComponentResource):
    """IAM (controller + node roles), interruption queue and rules, node access, both Helm releases, defaults."""

    controller_role_arn: pulumi.Output[str]
    controller_role_name: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_name: pulumi.Output[str]
    instance_profile_name: pulumi.Output[str | None]
    queue_name: pulumi.Output[str | None]
    queue_arn: pulumi.Output[str | None]
    queue_url: pulumi.Output[str | None]
    rule_names: pulumi.Output[list[str]]
    namespace: pulumi.Output[str]
    service_account: pulumi.Output[str]
    release_status: pulumi.Output[str | None]

    def __init__(self, name: str, args: args_.KarpenterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        problems = args_.validate(args) + _auto_name_problems(name, args)
        chart_root = charts.charts_dir(args.helm.charts_dir)
        problems += charts.chart_problems(chart_root)
        if problems:
            raise ValueError(f"Karpenter {name!r}: invalid arguments:\n" + "\n".join(f"  - {p}" for p in problems))
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._args = args
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        self._partition = aws.get_partition_output(opts=invoke).partition
        self._region = aws.get_region_output(opts=invoke).region
        self._account = aws.get_caller_identity_output(opts=invoke).account_id
        self._cluster_name = pulumi.Output.from_input(args.cluster_name)
        self._tags = dict(args.tags)

        node_role_arn, node_role_name = self._node_role(child)
        queue, queue_policy, rules = self._interruption(child) if args.queue.enabled else (None, None, [])
        controller_role = self._controller_role(child, node_role_arn=node_role_arn, queue=queue)
        profile = self._instance_profile(child, node_role_name)
        self._node_access(child, node_role_arn=node_role_arn, queue_policy=queue_policy)
        release = self._helm(chart_root, controller_role=controller_role, queue=queue, child=child)
        if args.default_node_pool is not None:
            self._defaults(args.default_node_pool, node_role_name=node_role_name, release=release)

        self.controller_role_arn = controller_role.arn
        self.controller_role_name = controller_role.name
        self.node_role_arn = node_role_arn
        self.node_role_name = node_role_name
        self.instance_profile_name = profile.name if profile else pulumi.Output.from_input(None)
        self.queue_name = queue.name if queue else pulumi.Output.from_input(None)
        self.queue_arn = queue.arn if queue else pulumi.Output.from_input(None)
        self.queue_url = queue.url if queue else pulumi.Output.from_input(None)
        self.rule_names = pulumi.Output.all(*[rule.name for rule in rules])
        self.namespace = pulumi.Output.from_input(args.namespace)
        self.service_account = pulumi.Output.from_input(args.service_account)
        self.release_status = release.status.apply(_status_text)
        self.register_outputs(
            {
                "controller_role_arn": self.controller_role_arn,
                "controller_role_name": self.controller_role_name,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "instance_profile_name": self.instance_profile_name,
                "queue_name": self.queue_name,
                "queue_arn": self.queue_arn,
                "queue_url": self.queue_url,
                "rule_names": self.rule_names,
                "namespace": self.namespace,
                "service_account": self.service_account,
                "release_status": self.release_status,
            }
        )

    # -- node role ------------------------------------------------------------------------------------------------

    def _node_role(self, child: pulumi.ResourceOptions) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        node = self._args.node_role
        if not node.create:
            arn = pulumi.Output.from_input(node.existing_arn).apply(lambda a: str(a))
            return arn, arn.apply(lambda a: a.rsplit("/", 1)[-1])
        role = aws.iam.Role(
            f"{self._name}-node",
            name=node.name,
            path=node.path,
            permissions_boundary=node.permissions_boundary_arn,
            assume_role_policy=self._partition.apply(lambda p: json.dumps(documents.node_trust_policy(p))),
            description=self._cluster_name.apply(lambda c: f"Nodes launched by karpy for EKS cluster {c}"),
            tags=self._tags,
            opts=child,
        )
        # Static keys: the managed policy ARNs are known from the partition, so names stay stable (TF PR #2962).
        for key in documents.node_managed_policy_arns("aws", ipv6=node.ipv6):
            aws.iam.RolePolicyAttachment(
                f"{self._name}-node-{key}",
                role=role.name,
                policy_arn=self._partition.apply(
                    lambda p, k=key: documents.node_managed_policy_arns(p, ipv6=node.ipv6)[k]  # type: ignore[misc]
                ),
                opts=child,
            )
        if node.ipv6:
            ipv6 = aws.iam.Policy(
                f"{self._name}-node-cni-ipv6",
                policy=self._partition.apply(lambda p: json.dumps(documents.node_cni_ipv6_policy(p))),
                tags=self._tags,
                opts=child,
            )
            aws.iam.RolePolicyAttachment(f"{self._name}-node-cni-ipv6", role=role.name, policy_arn=ipv6.arn, opts=child)
        for key, extra_arn in node.extra_policy_arns.items():
            aws.iam.RolePolicyAttachment(
                f"{self._name}-node-extra-{key}", role=role.name, policy_arn=extra_arn, opts=child
            )
        return role.arn, role.name

    def _instance_profile(
        self, child: pulumi.ResourceOptions, node_role_name: pulumi.Output[str]
    ) -> aws.iam.InstanceProfile | None:
        if not self._args.node_role.create_instance_profile:
            return None
        return aws.iam.InstanceProfile(
            f"{self._name}-instance-profile",
            role=node_role_name,
            path=self._args.node_role.path,
            tags=self._tags,
            opts=child,
        )

    # -- interruption queue and rules -----------------------------------------------------------------------------

    def _interruption(
        self, child: pulumi.ResourceOptions
    ) -> tuple[aws.sqs.Queue, aws.sqs.QueuePolicy, list[aws.cloudwatch.EventRule]]:
        spec = self._args.queue
        kms = spec.kms_master_key_id
        queue = aws.sqs.Queue(
            f"{self._name}-queue",
            name=spec.name,
            message_retention_seconds=documents.QUEUE_RETENTION_SECONDS,
            # Only one encryption setting at a time: sqs_managed_sse_enabled conflicts with a KMS key (TF PR #2575).
            sqs_managed_sse_enabled=None if kms is not None else True,
            kms_master_key_id=kms,
            kms_data_key_reuse_period_seconds=spec.kms_data_key_reuse_period_seconds,
            tags=self._tags,
            opts=child,
        )
        queue_policy = aws.sqs.QueuePolicy(
            f"{self._name}-queue-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(documents.queue_policy(arn))),
            opts=child,
        )
        rules = []
        for rule_spec in documents.EVENT_RULES:
            rule = aws.cloudwatch.EventRule(
                f"{self._name}-rule-{rule_spec.key}",
                name=self._cluster_name.apply(
                    lambda c, s=rule_spec: documents.event_rule_name(s, c, prefix=spec.rule_name_prefix)  # type: ignore[misc]
                ),
                description=f"karpy interruption handling: {rule_spec.detail_type}",
                event_pattern=json.dumps(rule_spec.pattern()),
                tags={**self._tags, "ClusterName": self._cluster_name},
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{self._name}-rule-{rule_spec.key}",
                rule=rule.name,
                arn=queue.arn,
                target_id=documents.EVENT_TARGET_ID,
                opts=child,
            )
            rules.append(rule)
        return queue, queue_policy, rules

    # -- controller role ------------------------------------------------------------------------------------------

    def _controller_role(
        self, child: pulumi.ResourceOptions, *, node_role_arn: pulumi.Output[str], queue: aws.sqs.Queue | None
    ) -> aws.iam.Role:
        spec = self._args.controller_role
        role = aws.iam.Role(
            f"{self._name}-controller",
            name=spec.name,
            path=spec.path,
            permissions_boundary=spec.permissions_boundary_arn,
            assume_role_policy=self._trust_policy(),
            description=self._cluster_name.apply(lambda c: f"karpy controller for EKS cluster {c}"),
            tags=self._tags,
            opts=child,
        )
        context = pulumi.Output.all(
            self._partition,
            self._region,
            self._account,
            self._cluster_name,
            node_role_arn,
            queue.arn if queue is not None else None,
        ).apply(
            lambda v: policy.PolicyContext(
                partition=v[0],
                region=v[1],
                account_id=v[2],
                cluster_name=v[3],
                node_role_arn=v[4],
                queue_arn=v[5],
                ssm_parameter_arns=tuple(spec.ssm_parameter_arns),
            )
        )
        documents_by_group = context.apply(policy.build_controller_policies)
        groups = [g for g in policy.PolicyGroup if queue is not None or g != policy.PolicyGroup.INTERRUPTION]
        for group in groups:
            slug = _kebab(group.value)
            managed = aws.iam.Policy(
                f"{self._name}-controller-{slug}",
                description=self._cluster_name.apply(
                    lambda c, g=group: (
                        f"karpy controller ({g}, upstream Karpenter {policy.KARPENTER_POLICY_VERSION}) for {c}"
                    )  # type: ignore[misc]
                ),
                path=spec.path,
                policy=documents_by_group.apply(lambda docs, g=group: json.dumps(docs[g])),  # type: ignore[misc]
                tags=self._tags,
                opts=child,
            )
            aws.iam.RolePolicyAttachment(
                f"{self._name}-controller-{slug}", role=role.name, policy_arn=managed.arn, opts=child
            )
        if spec.extra_statements:
            extra = aws.iam.Policy(
                f"{self._name}-controller-extra",
                path=spec.path,
                policy=json.dumps(policy.document([dict(s) for s in spec.extra_statements])),
                tags=self._tags,
                opts=child,
            )
            aws.iam.RolePolicyAttachment(
                f"{self._name}-controller-extra", role=role.name, policy_arn=extra.arn, opts=child
            )
        for key, arn in spec.extra_policy_arns.items():
            aws.iam.RolePolicyAttachment(
                f"{self._name}-controller-attach-{key}", role=role.name, policy_arn=arn, opts=child
            )
        if self._args.identity_mode == documents.IdentityMode.POD_IDENTITY:
            aws.eks.PodIdentityAssociation(
                f"{self._name}-pod-identity",
                cluster_name=self._cluster_name,
                namespace=self._args.namespace,
                service_account=self._args.service_account,
                role_arn=role.arn,
                tags=self._tags,
                opts=child,
            )
        return role

    def _trust_policy(self) -> pulumi.Output[str]:
        a = self._args
        if a.identity_mode == documents.IdentityMode.POD_IDENTITY:
            return pulumi.Output.from_input(json.dumps(documents.pod_identity_trust_policy()))
        return pulumi.Output.all(a.oidc_provider_arn, a.oidc_issuer_url).apply(
            lambda v: json.dumps(
                documents.irsa_trust_policy(
                    oidc_provider_arn=v[0], oidc_issuer=v[1], namespace=a.namespace, service_account=a.service_account
                )
            )
        )

    # -- node access ----------------------------------------------------------------------------------------------

    def _node_access(
        self,
        child: pulumi.ResourceOptions,
        *,
        node_role_arn: pulumi.Output[str],
        queue_policy: aws.sqs.QueuePolicy | None,
    ) -> None:
        access = self._args.access
        if access.mode == args_.AccessMode.ACCESS_ENTRY:
            # terraform-aws-eks waits on the queue policy first: a just-created role is not yet visible to EKS.
            aws.eks.AccessEntry(
                f"{self._name}-node-access",
                cluster_name=self._cluster_name,
                principal_arn=node_role_arn,
                type=access.access_entry_type,
                tags=self._tags,
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[queue_policy] if queue_policy else [])
                ),
            )
        elif access.mode == args_.AccessMode.AWS_AUTH:
            map_roles = node_role_arn.apply(
                lambda arn: _aws_auth_map_roles(
                    access.aws_auth_map_roles, arn, windows=access.access_entry_type == "EC2_WINDOWS"
                )
            )
            k8s.core.v1.ConfigMapPatch(
                f"{self._name}-aws-auth",
                metadata={"name": "aws-auth", "namespace": "kube-system"},
                data={"mapRoles": map_roles},
                opts=child,
            )

    # -- Helm -----------------------------------------------------------------------------------------------------

    def _helm(
        self,
        chart_root: Path,
        *,
        controller_role: aws.iam.Role,
        queue: aws.sqs.Queue | None,
        child: pulumi.ResourceOptions,
    ) -> k8s.helm.v3.Release:
        a = self._args
        helm = a.helm
        crds = k8s.helm.v3.Release(
            f"{self._name}-crd",
            name=f"{helm.release_name}-crd",
            chart=str(chart_root / charts.CRD_CHART),
            namespace=a.namespace,
            create_namespace=helm.create_namespace,
            timeout=helm.timeout_seconds,
            opts=child,
        )
        owned = charts.owned_values(
            cluster_name=self._cluster_name,
            cluster_endpoint=a.cluster_endpoint,
            interruption_queue=queue.name if queue is not None else None,
            service_account=a.service_account,
            irsa_role_arn=controller_role.arn if a.identity_mode == documents.IdentityMode.IRSA else None,
            replicas=helm.replicas,
            resources=helm.resources,
            log_level=helm.log_level,
            image_repository=helm.image_repository,
            image_tag=helm.image_tag,
        )
        return k8s.helm.v3.Release(
            f"{self._name}-controller",
            name=helm.release_name,
            chart=str(chart_root / charts.CONTROLLER_CHART),
            namespace=a.namespace,
            skip_crds=True,
            atomic=True,
            timeout=helm.timeout_seconds,
            values=charts.deep_merge(helm.values, owned),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[crds])),
        )

    def _defaults(
        self, pool: args_.DefaultNodePoolArgs, *, node_role_name: pulumi.Output[str], release: k8s.helm.v3.Release
    ) -> None:
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release])
        discovery = pool.discovery_tag_value if pool.discovery_tag_value is not None else self._cluster_name
        nodeclass = k8s.apiextensions.CustomResource(
            f"{self._name}-default-nodeclass",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": pool.name},
            spec=defaults.ec2nodeclass_spec(pool, role=node_role_name, discovery_value=discovery),
            opts=after_release,
        )
        k8s.apiextensions.CustomResource(
            f"{self._name}-default-nodepool",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            metadata={"name": pool.name},
            spec=defaults.nodepool_spec(pool),
            opts=pulumi.ResourceOptions.merge(after_release, pulumi.ResourceOptions(depends_on=[nodeclass])),
        )


# Pulumi auto-naming appends "-" and 7 random characters to the resource name.
_AUTO_NAME_SUFFIX = 8


def _auto_name_problems(name: str, args: args_.KarpenterArgs) -> list[str]:
    """Auto-named IAM roles (64) and queues (80) must fit their limits; say which explicit name to set instead."""
    checks = [
        (f"{name}-controller", args.controller_role.name, 64, "controller_role.name"),
        (f"{name}-node", args.node_role.name if args.node_role.create else "", 64, "node_role.name"),
        (f"{name}-queue", args.queue.name if args.queue.enabled else "", 80, "queue.name"),
    ]
    return [
        f"component name {name!r} is too long for an auto-named {resource!r} ({limit} characters); set {field}"
        for resource, explicit, limit, field in checks
        if explicit is None and len(resource) + _AUTO_NAME_SUFFIX > limit
    ]


def _kebab(camel: str) -> str:
    """`NodeLifecycle` → `node-lifecycle`, `IAMIntegration` → `iam-integration`."""
    out: list[str] = []
    for i, c in enumerate(camel):
        if c.isupper() and i and (not camel[i - 1].isupper() or (i + 1 < len(camel) and camel[i + 1].islower())):
            out.append("-")
        out.append(c.lower())
    return "".join(out)


def _aws_auth_map_roles(existing: Sequence[Mapping[str, Any]], node_role_arn: str, *, windows: bool) -> str:
    groups = ["system:bootstrappers", "system:nodes", *(["eks:kube-proxy-windows"] if windows else [])]
    entry = {"rolearn": node_role_arn, "username": "system:node:{{EC2PrivateDNSName}}", "groups": groups}
    kept = [dict(e) for e in existing if e.get("rolearn") != node_role_arn]
    return str(yaml.safe_dump([*kept, entry], sort_keys=False))


def _status_text(status: Any) -> str | None:
    if status is None:
        return None
    value = status.get("status") if isinstance(status, Mapping) else getattr(status, "status", None)
    return None if value is None else str(value)
