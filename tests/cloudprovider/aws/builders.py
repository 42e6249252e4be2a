"""Shared value builders for the AWS provider tests (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping

from karpy.api import ec2nodeclass, labels, meta, quantity
from karpy.cloudprovider import types

OD = labels.CAPACITY_TYPE_ON_DEMAND
SPOT = labels.CAPACITY_TYPE_SPOT


def make_instance_type(
    name: str,
    *,
    cpu: int = 2,
    memory_gib: int = 8,
    prices: Mapping[tuple[str, str], float] | None = None,
    extra_capacity: Mapping[str, int] | None = None,
    arch: str = "amd64",
) -> types.InstanceType:
    """`prices` maps (zone, capacity type) → $/h; default one on-demand offering in zone a."""
    offers = prices or {("us-east-1a", OD): 0.1}
    capacity = {
        labels.RESOURCE_CPU: cpu * 1000,
        labels.RESOURCE_MEMORY: memory_gib * quantity.GI,
        labels.RESOURCE_PODS: 110 * 1000,
        **(extra_capacity or {}),
    }
    return types.InstanceType(
        name=name,
        labels={labels.LABEL_INSTANCE_TYPE: name, labels.LABEL_ARCH: arch, labels.LABEL_OS: "linux"},
        capacity=capacity,
        offerings=tuple(types.Offering(zone=z, capacity_type=ct, price=p) for (z, ct), p in offers.items()),
    )


def make_nodeclass(
    name: str = "default",
    *,
    alias: str = "al2023@latest",
    role: str = "KarpenterNodeRole-test",
    instance_profile: str = "",
    status: ec2nodeclass.EC2NodeClassStatus | None = None,
    annotations: Mapping[str, str] = meta.EMPTY,
    tags: Mapping[str, str] = meta.EMPTY,
    generation: int = 1,
    user_data: str | None = None,
    discovery: str = "test-cluster",
) -> ec2nodeclass.EC2NodeClass:
    return ec2nodeclass.EC2NodeClass(
        metadata=meta.ObjectMeta(name=name, uid=f"uid-{name}", annotations=annotations, generation=generation),
        spec=ec2nodeclass.EC2NodeClassSpec(
            subnet_selector_terms=(ec2nodeclass.SubnetSelectorTerm(tags={"karpenter.sh/discovery": discovery}),),
            security_group_selector_terms=(
                ec2nodeclass.SecurityGroupSelectorTerm(tags={"karpenter.sh/discovery": discovery}),
            ),
            ami_selector_terms=(ec2nodeclass.AMISelectorTerm(alias=alias),),
            role="" if instance_profile else role,
            instance_profile=instance_profile,
            tags=tags,
            user_data=user_data,
        ),
        status=status or ec2nodeclass.EC2NodeClassStatus(),
    )
