"""Move a cluster from cluster-autoscaler + managed node groups to karpy, one `pulumi up` per phase.

The stack adopts every managed node group (phase 0 imports them) and the cluster-autoscaler release. Each node
group is declared with every input it has now, read from EKS (`aws.eks.get_node_group`): labels, taints, tags,
launch template, instance and AMI types, versions, scaling and update config. So `pulumi preview` after the
import shows no change, and later phases change only what they mean to (the scaling). `phase` (stack config)
selects how far the migration has gone; rolling back is setting the previous value and running `pulumi up`.

  0  baseline: the node groups (imported as they are) and cluster-autoscaler
  1  discovery tags; karpy pinned to the system node group (and, optionally, CoreDNS and metrics-server)
  2  NodePools + EC2NodeClass matching the node groups' instance families (karpy starts serving pending pods)
  3  cluster-autoscaler scaled to zero; the system node group to its floor, the others to zero
  4  cluster-autoscaler removed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

import pulumi_karpy

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
PINNED_ADDONS = ("coredns", "metrics-server")
"""kube-system Deployments that must keep running on the node group that stays (karpy needs DNS to start)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What each phase keeps, derived from the phase number alone (pure, so the tests can table it)."""

    phase: int

    def __post_init__(self) -> None:
        if not 0 <= self.phase <= 4:
            raise ValueError(f"phase: {self.phase} must be 0..4")

    @property
    def importing(self) -> bool:
        return self.phase == 0

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
    def shrink_node_groups(self) -> bool:
        return self.phase >= 3


def node_group_inputs(live: Any) -> dict[str, Any]:
    """Every input of a managed node group as EKS reports it (`get_node_group`), in `aws.eks.NodeGroup`'s terms.

    With a launch template, EKS takes the disk and remote access from the template and refuses them on the node
    group, so they are declared only without one."""
    template = (live.launch_templates or [None])[0]
    scaling = live.scaling_configs[0]
    update = (live.update_configs or [None])[0]
    remote = (live.remote_accesses or [None])[0]
    return {
        "node_role_arn": live.node_role_arn,
        "subnet_ids": list(live.subnet_ids),
        "instance_types": list(live.instance_types or []),
        "ami_type": live.ami_type,
        "capacity_type": live.capacity_type,
        "version": live.version,
        "release_version": live.release_version,
        "labels": dict(live.labels or {}),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in live.taints or []],
        "tags": dict(live.tags or {}),
        "scaling_config": {
            "min_size": scaling.min_size,
            "desired_size": scaling.desired_size,
            "max_size": scaling.max_size,
        },
        "update_config": (
            {
                key: value
                for key, value in (
                    ("max_unavailable", update.max_unavailable),
                    ("max_unavailable_percentage", update.max_unavailable_percentage),
                )
                if value
            }
            if update is not None
            else None
        ),
        "launch_template": {"id": template.id, "version": template.version} if template is not None else None,
        "disk_size": None if template is not None else live.disk_size,
        "remote_access": (
            {"ec2_ssh_key": remote.ec2_ssh_key, "source_security_group_ids": list(remote.source_security_group_ids)}
            if remote is not None and template is None
            else None
        ),
    }


DECLARED = (
    "node_role_arn", "subnet_ids", "instance_types", "ami_type", "capacity_type", "version", "release_version",
    "labels", "taints", "tags", "update_config", "launch_template", "disk_size", "remote_access",
)  # fmt: skip
"""The node group inputs declared as EKS reports them (the scaling is the phase's)."""


def scaling(plan: Plan, live: Mapping[str, int], *, system: bool, floor: int) -> dict[str, int]:
    """The node group's size in this phase: as it is until phase 3, then the floor (system group) or nothing."""
    if not plan.shrink_node_groups:
        return dict(live)
    size = floor if system else 0
    return {"min_size": size, "desired_size": size, "max_size": max(size, 1)}


def families(instance_types: Sequence[Sequence[str]]) -> list[str]:
    """`m6i.large`, `m6i.xlarge`, `c6i.large` → `c6i`, `m6i`: the families the node groups ran."""
    return sorted({name.split(".")[0] for types in instance_types for name in types})


def main() -> dict[str, Any]:
    config = pulumi.Config()
    plan = Plan(config.get_int("phase") or 0)
    cluster_name = config.require("clusterName")
    groups: list[str] = config.require_object("nodeGroups")
    system_group = config.get("systemNodeGroup") or groups[0]
    if system_group not in groups:
        raise ValueError(f"systemNodeGroup: {system_group!r} is not one of nodeGroups {groups}")
    floor = config.get_int("nodeGroupFloor") or 2
    subnet_ids: list[str] = config.require_object("subnetIds")

    aws_provider = aws.Provider("aws", region=pulumi.Config("aws").get("region"))
    k8s_provider = k8s.Provider("kubernetes", kubeconfig=config.get("kubeconfig") or None)
    outputs: dict[str, Any] = {"phase": plan.phase}

    live_types = []
    for name in groups:
        live = aws.eks.get_node_group_output(
            cluster_name=cluster_name, node_group_name=name, opts=pulumi.InvokeOutputOptions(provider=aws_provider)
        )
        declared = live.apply(node_group_inputs)
        live_types.append(declared.apply(lambda d: d["instance_types"]))

        def field(key: str, declared: pulumi.Output[dict[str, Any]] = declared) -> pulumi.Output[Any]:
            return declared.apply(lambda d: d[key])

        node_group = aws.eks.NodeGroup(
            f"node-group-{name}",
            cluster_name=cluster_name,
            node_group_name=name,
            **{key: field(key) for key in DECLARED},
            scaling_config=declared.apply(
                lambda d, system=name == system_group: scaling(plan, d["scaling_config"], system=system, floor=floor)
            ),
            opts=pulumi.ResourceOptions(
                provider=aws_provider,
                protect=True,
                import_=f"{cluster_name}:{name}" if plan.importing else None,
            ),
        )
        outputs[f"{name}Desired"] = node_group.scaling_config.desired_size

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
        outputs.update(
            install_karpy(
                config, plan, cluster_name=cluster_name, system_group=system_group, subnet_ids=subnet_ids,
                live_types=live_types, aws_provider=aws_provider, k8s_provider=k8s_provider,
            )
        )  # fmt: skip
    return outputs


def install_karpy(
    config: pulumi.Config,
    plan: Plan,
    *,
    cluster_name: str,
    system_group: str,
    subnet_ids: list[str],
    live_types: list[pulumi.Output[list[str]]],
    aws_provider: aws.Provider,
    k8s_provider: k8s.Provider,
) -> dict[str, Any]:
    pulumi_karpy.DiscoveryTags(
        "discovery",
        pulumi_karpy.DiscoveryTagsArgs(
            value=cluster_name, subnet_ids=subnet_ids, security_group_ids=[config.require("securityGroupId")]
        ),
        opts=pulumi.ResourceOptions(providers=[aws_provider]),
    )
    # Pod Identity needs the eks-pod-identity-agent add-on: created here, or required to exist (the lookup fails
    # with the add-on's name when it does not, before anything is changed).
    agent = config.get("podIdentityAgent") or "present"
    if agent not in ("create", "present"):
        raise ValueError(f"podIdentityAgent: {agent!r} must be 'create' or 'present'")
    if agent == "present":
        aws.eks.get_addon_output(
            cluster_name=cluster_name,
            addon_name="eks-pod-identity-agent",
            opts=pulumi.InvokeOutputOptions(provider=aws_provider),
        )
    # CONFIG_MAP clusters (no access entries) get the node role into aws-auth, after the entries already there.
    access_mode = pulumi_karpy.AccessMode(config.get("accessMode") or "access_entry")
    access = pulumi_karpy.AccessArgs(mode=access_mode)
    if access_mode == pulumi_karpy.AccessMode.AWS_AUTH:
        access["aws_auth_map_roles"] = config.require_object("awsAuthMapRoles")
    pin = {NODEGROUP_LABEL: system_group}
    karpenter_args = pulumi_karpy.KarpenterArgs(
        cluster_name=cluster_name,
        create_pod_identity_agent=agent == "create",
        access=access,
        # Pinned to the system node group, which keeps a floor of nodes for karpy and the critical add-ons.
        helm=pulumi_karpy.HelmArgs(values={"nodeSelector": pin}),
        tags={"migration": "from-managed-node-groups"},
    )
    if image := config.get("imageReference"):  # outside this repository there is no Dockerfile to build
        karpenter_args["image"] = pulumi_karpy.ImageArgs(reference=image)
    if plan.node_pools:
        karpenter_args["default_node_pool"] = pulumi_karpy.DefaultNodePoolArgs(name="migrated")
    karpenter = pulumi_karpy.Karpenter(
        "karpy", karpenter_args, opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider])
    )
    if config.get_bool("pinAddons"):
        for addon in PINNED_ADDONS:
            k8s.apps.v1.DeploymentPatch(
                f"{addon}-on-{system_group}",
                # patchForce: the EKS add-on manager owns these Deployments' other fields.
                metadata={"name": addon, "namespace": "kube-system", "annotations": {"pulumi.com/patchForce": "true"}},
                spec={"template": {"spec": {"nodeSelector": pin}}},
                opts=pulumi.ResourceOptions(provider=k8s_provider),
            )
    if plan.node_pools:
        # The families the node groups ran, so workloads keep landing on the kind of node they were sized for.
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
                            {
                                "key": "karpenter.k8s.aws/instance-family",
                                "operator": "In",
                                "values": pulumi.Output.all(*live_types).apply(families),
                            },
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    }
                },
                "limits": {"cpu": "1000"},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"},
            },
            opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[karpenter]),
        )
    return {"nodeRoleName": karpenter.node_role_name, "queueName": karpenter.queue_name}


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
