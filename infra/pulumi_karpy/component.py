"""`Karpenter`: the whole karpy deployment on an existing EKS cluster as one component (`karpy:index:Karpenter`).

Children are named `f"{name}-<role>"` with `parent=self`, so the AWS and Kubernetes providers the caller passes in
`opts.providers` are inherited; the component never builds a provider or a kubeconfig itself. Arguments are
resolved and validated before anything is declared; resources are never declared inside `.apply()`.

Order, both ways: the controller release depends on every identity, access, queue and image resource, so it
starts with credentials, a queue that receives events and nodes that can join; the default EC2NodeClass and
NodePool depend on the release, so `pulumi destroy` deletes them first, while the controller still runs to drain
and terminate their nodes, and only then removes the controller, its IAM and the access entry.

Annotations stay resolvable (no `from __future__ import annotations`): Pulumi's component analyzer reads them and
the attribute docstrings to build the schema other languages use.
"""

import asyncio
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import charts, check, defaults, identity, image, interruption, preview
from pulumi_karpy import scope as pulumi_karpy_scope
from pulumi_karpy import spec as pulumi_karpy_spec

TYPE_TOKEN = "karpy:index:Karpenter"

# Pulumi auto-naming appends "-" and 7 random characters to the resource name.
_AUTO_NAME_SUFFIX = 8


class Karpenter(pulumi.ComponentResource):
    """karpy on an existing EKS cluster: IAM (controller and node roles), the interruption queue and rules, node
    access, the controller image, both Helm releases and, optionally, a default EC2NodeClass and NodePool."""

    controller_role_arn: pulumi.Output[str]
    """ARN of the controller's IAM role."""
    controller_role_name: pulumi.Output[str]
    """Name of the controller's IAM role."""
    node_role_arn: pulumi.Output[str]
    """ARN of the nodes' IAM role."""
    node_role_name: pulumi.Output[str]
    """Name of the nodes' IAM role: what `EC2NodeClass.spec.role` names."""
    instance_profile_name: pulumi.Output[str | None]
    """Name of the instance profile, when node_role.create_instance_profile is set."""
    queue_name: pulumi.Output[str | None]
    """Name of the interruption queue (the controller's INTERRUPTION_QUEUE), when enabled."""
    queue_arn: pulumi.Output[str | None]
    """ARN of the interruption queue, when enabled."""
    queue_url: pulumi.Output[str | None]
    """URL of the interruption queue, when enabled."""
    rule_names: pulumi.Output[list[str]]
    """Names of the EventBridge rules feeding the queue."""
    image_ref: pulumi.Output[str]
    """The controller image the release runs (`repository@sha256:...` when built by the stack)."""
    image_repository_url: pulumi.Output[str | None]
    """URL of the ECR repository the stack pushes the image to, when it builds it."""
    namespace: pulumi.Output[str]
    """Namespace of the releases."""
    service_account: pulumi.Output[str]
    """The controller's ServiceAccount."""
    release_status: pulumi.Output[str | None]
    """Helm status of the controller release (`deployed`)."""

    def __init__(
        self, name: str, args: pulumi_karpy_args.KarpenterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        spec = _resolved(name, args)
        chart_root = charts.charts_dir(spec.helm.charts_dir)
        super().__init__(TYPE_TOKEN, name, None, opts)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        scope = pulumi_karpy_scope.Scope(
            name=name,
            spec=spec,
            child=pulumi.ResourceOptions(parent=self),
            partition=aws.get_partition_output(opts=invoke).partition,
            region=aws.get_region_output(opts=invoke).region,
            account=aws.get_caller_identity_output(opts=invoke).account_id,
            cluster_name=pulumi.Output.from_input(spec.cluster_name),
            tags=dict(spec.tags),
        )

        node = identity.node_role(scope)
        queue = interruption.declare(scope) if spec.queue.enabled else None
        controller = identity.controller_role(
            scope, node_role_arn=node.arn, queue=queue.queue if queue is not None else None
        )
        profile = identity.instance_profile(scope, node)
        access = identity.node_access(scope, node=node, queue_policy=queue.queue_policy if queue else None)
        controller_image = image.declare(scope)
        prerequisites = [
            *node.resources,
            *controller.resources,
            *(queue.resources if queue is not None else []),
            *([access] if access is not None else []),
            *([profile] if profile is not None else []),
            *controller_image.resources,
        ]
        crds = _crds(scope, chart_root)
        values = self._values(scope, controller=controller, queue=queue, image_values=controller_image.values)
        release = self._helm(scope, chart_root, values=values, prerequisites=[crds, *prerequisites])
        if spec.helm.check:
            check.declare(
                scope, chart_root, release_values=values, image=controller_image.reference,
                interruption_queue=queue.queue.name if queue is not None else None, after=[crds, *prerequisites],
            )  # fmt: skip
        if spec.default_node_pool is not None:
            self._defaults(scope, spec.default_node_pool, node_role_name=node.name, release=release)

        self.controller_role_arn = controller.role.arn
        self.controller_role_name = controller.role.name
        self.node_role_arn = node.arn
        self.node_role_name = node.name
        self.instance_profile_name = profile.name if profile else pulumi.Output.from_input(None)
        self.queue_name = queue.queue.name if queue else pulumi.Output.from_input(None)
        self.queue_arn = queue.queue.arn if queue else pulumi.Output.from_input(None)
        self.queue_url = queue.queue.url if queue else pulumi.Output.from_input(None)
        self.rule_names = pulumi.Output.all(*[rule.name for rule in (queue.rules if queue else [])])
        self.image_ref = controller_image.reference
        self.image_repository_url = controller_image.repository_url
        self.namespace = pulumi.Output.from_input(spec.namespace)
        self.service_account = pulumi.Output.from_input(spec.service_account)
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
                "image_ref": self.image_ref,
                "image_repository_url": self.image_repository_url,
                "namespace": self.namespace,
                "service_account": self.service_account,
                "release_status": self.release_status,
            }
        )

    def _values(
        self,
        scope: pulumi_karpy_scope.Scope,
        *,
        controller: identity.ControllerRole,
        queue: interruption.Interruption | None,
        image_values: pulumi.Output[dict[str, str]],
    ) -> pulumi.Output[dict[str, Any]]:
        """The controller release's values: the caller's with the component's own merged over them."""
        spec = scope.spec
        helm = spec.helm
        owned = charts.owned_values(
            cluster_name=scope.cluster_name,
            cluster_endpoint=spec.cluster_endpoint,
            region=scope.region,
            interruption_queue=queue.queue.name if queue is not None else None,
            service_account=spec.service_account,
            irsa_role_arn=controller.role.arn if spec.identity_mode == pulumi_karpy_args.IdentityMode.IRSA else None,
            replicas=helm.replicas,
            timeout_seconds=helm.timeout_seconds,
            resources=helm.resources,
            log_level=helm.log_level,
            image=image_values,
            pinned_arch=pulumi_karpy_spec.pinned_arch(spec),
        )
        return charts.release_values(helm.values, owned)

    def _helm(
        self,
        scope: pulumi_karpy_scope.Scope,
        chart_root: Any,
        *,
        values: pulumi.Output[dict[str, Any]],
        prerequisites: list[pulumi.Resource | None],
    ) -> k8s.helm.v3.Release:
        spec = scope.spec
        helm = spec.helm
        return k8s.helm.v3.Release(
            f"{scope.name}-controller",
            name=helm.release_name,
            chart=charts.chart_path(chart_root, charts.CONTROLLER_CHART),
            version=pulumi_karpy_args.VERSION,
            namespace=spec.namespace,
            create_namespace=spec.creates_namespace,
            skip_crds=True,
            # Helm waits until the controller's pods are Ready; a controller that AWS refuses exits at start with the
            # reason (upstream's EC2 connectivity check), so a broken identity fails `pulumi up` instead of deploying
            # a controller that launches nothing. Helm's error names the timeout only (helm_release.go waits with
            # Helm's own waiter, which reads no pod status): the reason comes from the check Job beside the release
            # (`pulumi_karpy.check`). Atomic: the failed install is rolled back, so the next `pulumi up` starts
            # clean.
            skip_await=False,
            atomic=True,
            timeout=helm.timeout_seconds,
            values=values,
            opts=scope.after(*prerequisites),
        )

    def _defaults(
        self,
        scope: pulumi_karpy_scope.Scope,
        pool: pulumi_karpy_spec.DefaultNodePool,
        *,
        node_role_name: pulumi.Output[str],
        release: k8s.helm.v3.Release,
    ) -> None:
        discovery = pool.discovery_tag_value if pool.discovery_tag_value is not None else scope.cluster_name
        nodeclass = k8s.apiextensions.CustomResource(
            f"{scope.name}-default-nodeclass",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": pool.name},
            spec=defaults.ec2nodeclass_spec(pool, role=node_role_name, discovery_value=discovery),
            opts=scope.after(release),
        )
        nodepool = k8s.apiextensions.CustomResource(
            f"{scope.name}-default-nodepool",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            # Foreground deletion: Pulumi waits until the NodeClaims the NodePool owns (blockOwnerDeletion) are
            # gone, i.e. until the controller has drained and terminated their nodes, before it moves on.
            metadata={"name": pool.name, "annotations": {defaults.DELETION_POLICY_ANNOTATION: "foreground"}},
            spec=defaults.nodepool_spec(pool),
            opts=scope.after(release, nodeclass),
        )
        if pool.plan_preview and pulumi.runtime.is_dry_run():
            _plan_preview(pool, role=node_role_name, discovery=discovery, resource=nodepool)


def _plan_preview(
    pool: pulumi_karpy_spec.DefaultNodePool, *, role: pulumi.Input[str], discovery: object, resource: pulumi.Resource
) -> pulumi.Output[str]:
    """Log `karpy plan`'s summary of the default objects as the preview would apply them (`preview`); the values
    they take from other resources are awaited first (no resource is declared here). Returns the summary."""

    async def show(values: list[Any]) -> str:
        role_name, discovery_value = values
        objects = [
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": pool.name},
                "spec": defaults.ec2nodeclass_spec(pool, role=role_name, discovery_value=discovery_value),
            },
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": pool.name},
                "spec": defaults.nodepool_spec(pool),
            },
        ]
        lines = await asyncio.to_thread(preview.plan, objects)
        for line in lines:
            pulumi.log.info(f"karpy plan: {line}", resource=resource)
        return "\n".join(lines)

    resolved = pulumi.Output.all(pulumi.Output.from_input(role), pulumi.Output.from_input(discovery))
    return resolved.apply(show)


def _crds(scope: pulumi_karpy_scope.Scope, chart_root: Any) -> k8s.helm.v3.Release | None:
    """The CRD release the controller release waits for (after its adoption patches), or None (crds: skip)."""
    spec = scope.spec
    if spec.crds == pulumi_karpy_args.CrdMode.SKIP:
        return None
    release_name = f"{spec.helm.release_name}-crd"
    adopted: list[pulumi.Resource] = []
    if spec.crds == pulumi_karpy_args.CrdMode.ADOPT:
        metadata = charts.adoption_metadata(release=release_name, namespace=spec.namespace)
        adopted = [
            k8s.apiextensions.v1.CustomResourceDefinitionPatch(
                f"{scope.name}-adopt-{crd.split('.')[0]}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=crd, annotations=metadata["annotations"], labels=metadata["labels"]
                ),
                opts=scope.child,
            )
            for crd in charts.CRD_NAMES
        ]
    return k8s.helm.v3.Release(
        f"{scope.name}-crd",
        name=release_name,
        chart=charts.chart_path(chart_root, charts.CRD_CHART),
        version=pulumi_karpy_args.VERSION,
        namespace=spec.namespace,
        create_namespace=spec.creates_namespace,
        timeout=spec.helm.timeout_seconds,
        opts=scope.after(*adopted),
    )


def _resolved(name: str, args: Mapping[str, Any]) -> pulumi_karpy_spec.Karpenter:
    try:
        spec = pulumi_karpy_spec.resolve(args)
    except pulumi_karpy_spec.InvalidArguments as exc:
        problems = str(exc).splitlines()
    else:
        problems = pulumi_karpy_spec.validate(spec) + _auto_name_problems(name, spec)
        problems += charts.chart_problems(charts.charts_dir(spec.helm.charts_dir))
        if spec.image.build:
            problems += image.context_problems(spec.image.context)
    if problems:
        raise ValueError(f"Karpenter {name!r}: invalid arguments:\n" + "\n".join(f"  - {p}" for p in problems))
    return spec


def _auto_name_problems(name: str, spec: pulumi_karpy_spec.Karpenter) -> list[str]:
    """Auto-named IAM roles (64) and queues (80) must fit their limits; say which explicit name to set instead."""
    checks = [
        (f"{name}-controller", spec.controller_role.name, 64, "controller_role.name"),
        (f"{name}-node", spec.node_role.name if spec.node_role.create else "", 64, "node_role.name"),
        (f"{name}-queue", spec.queue.name if spec.queue.enabled else "", 80, "queue.name"),
    ]
    return [
        f"component name {name!r} is too long for an auto-named {resource!r} ({limit} characters); set {field}"
        for resource, explicit, limit, field in checks
        if explicit is None and len(resource) + _AUTO_NAME_SUFFIX > limit
    ]


def _status_text(status: Any) -> str | None:
    if status is None:
        return None
    value = status.get("status") if isinstance(status, Mapping) else getattr(status, "status", None)
    return None if value is None else str(value)
