"""Move a cluster from cluster-autoscaler + a managed node group to karpy, one `pulumi up` per phase.

The stack owns the managed node group and the cluster-autoscaler release (import them first; see README.md).
`phase` (stack config) selects how far the migration has gone; rolling back a phase = setting the previous value
and running `pulumi up` again.

  0  baseline: the node group (as imported) and cluster-autoscaler
  1  tag the node group's subnets and security group for discovery; install karpy pinned to the node group
  2  NodePool + EC2NodeClass matching the node group's instance families (karpy starts serving pending pods)
  3  cluster-autoscaler scaled to zero; node group scaled down to its floor (its pods move to karpy's nodes)
  4  cluster-autoscaler removed
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args, component, discovery

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


@dataclass(frozen=True, slots=True)
class Plan:
    """What each phase keeps, derived from the phase number alone (pure, so the tests can table it)."""

    phase: int

    def __post_init__(self) -> None:
        if not 0 <= self.phase <= 4:
            raise ValueError(f"phase: {self.phase} must be 0..4")

    @property
    def karpy(self) -> bool:
        return self.phase >= 1

    @property
    def node_pools(self) -> bool:
        return self.phase >= 2

    @property
    def autoscaler_replicas(self) -> int | None:
        """None = no cluster-autoscaler release at all."""
        return None if self.phase >= 4 else (0 if self.phase >= 3 else 1)

    @property
    def shrink_node_group(self) -> bool:
        return self.phase >= 3


def node_group_scaling(plan: Plan, size: dict[str, int], floor: int) -> aws.eks.NodeGroupScalingConfigArgs:
    if not plan.shrink_node_group:
        return aws.eks.NodeGroupScalingConfigArgs(
            min_size=size["min"], desired_size=size["desired"], max_size=size["max"]
        )
    return aws.eks.NodeGroupScalingConfigArgs(min_size=floor, desired_size=floor, max_size=floor)


def main() -> dict[str, Any]:
    config = pulumi.Config()
    plan = Plan(config.get_int("phase") or 0)
    cluster_name = config.require("clusterName")
    node_group_name = config.require("nodeGroupName")
    subnet_ids: list[str] = config.require_object("subnetIds")
    families: list[str] = config.require_object("instanceFamilies")
    size: dict[str, int] = config.get_object("nodeGroupSize") or {"min": 3, "desired": 3, "max": 10}

    aws_provider = aws.Provider("aws", region=pulumi.Config("aws").get("region"))
    k8s_provider = k8s.Provider("kubernetes", kubeconfig=config.get("kubeconfig") or None)

    # The existing node group, imported into this stack (`pulumi import aws:eks/nodeGroup:NodeGroup ...`).
    node_group = aws.eks.NodeGroup(
        "node-group",
        cluster_name=cluster_name,
        node_group_name=node_group_name,
        node_role_arn=config.require("nodeGroupRoleArn"),
        subnet_ids=subnet_ids,
        scaling_config=node_group_scaling(plan, size, config.get_int("nodeGroupFloor") or 2),
        opts=pulumi.ResourceOptions(provider=aws_provider, protect=True),
    )
    outputs: dict[str, Any] = {"phase": plan.phase, "nodeGroupDesired": node_group.scaling_config.desired_size}

    replicas = plan.autoscaler_replicas
    if replicas is not None:
        k8s.helm.v3.Release(
            "cluster-autoscaler",
            name="cluster-autoscaler",
            chart="cluster-autoscaler",
            version="9.46.6",
            namespace="kube-system",
            repository_opts={"repo": "https://kubernetes.github.io/autoscaler"},
            values={
                "replicaCount": replicas,
                "autoDiscovery": {"clusterName": cluster_name},
                "awsRegion": pulumi.Config("aws").get("region"),
            },
            opts=pulumi.ResourceOptions(provider=k8s_provider),
        )

    if plan.karpy:
        discovery.DiscoveryTags(
            "discovery",
            discovery.DiscoveryTagsArgs(
                value=cluster_name, subnet_ids=subnet_ids, security_group_ids=[config.require("securityGroupId")]
            ),
            opts=pulumi.ResourceOptions(providers=[aws_provider]),
        )
        pool = (
            args.DefaultNodePoolArgs(name="migrated", instance_categories=sorted({f[0] for f in families}))
            if plan.node_pools
            else None
        )
        karpenter = component.Karpenter(
            "karpy",
            args.KarpenterArgs(
                cluster_name=cluster_name,
                # Pinned to the node group, which keeps a floor of nodes for karpy and the critical add-ons.
                helm=args.HelmArgs(values={"nodeSelector": {NODEGROUP_LABEL: node_group_name}}),
                default_node_pool=pool,
                tags={"migration": "from-managed-node-groups"},
            ),
            opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider]),
        )
        if plan.node_pools:
            # The families the node group used, so workloads keep landing on the kind of node they were sized for.
            k8s.apiextensions.CustomResource(
                "migrated-families",
                api_version="karpenter.sh/v1",
                kind="NodePool",
                metadata={"name": "node-group-families"},
                spec={
                    "weight": 10,
                    "template": {
                        "spec": {
                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "migrated"},
                            "requirements": [
                                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families},
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            ],
                        }
                    },
                    "limits": {"cpu": "1000"},
                    "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"},
                },
                opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[karpenter]),
            )
        outputs["nodeRoleName"] = karpenter.node_role_name
        outputs["queueName"] = karpenter.queue_name
    return outputs


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
