"""`DiscoveryTags`: tag existing subnets and security groups so EC2NodeClass selectors find them.

Uses `aws.ec2.Tag` (one tag on a resource someone else manages) rather than adopting the subnets or groups, so a
VPC owned by another stack or tool is not taken over. Token `karpy:index:DiscoveryTags`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True, slots=True)
class DiscoveryTagsArgs:
    value: pulumi.Input[str]
    """Tag value, usually the cluster name (matched by `subnetSelectorTerms[].tags`)."""
    subnet_ids: Sequence[pulumi.Input[str]] = ()
    security_group_ids: Sequence[pulumi.Input[str]] = ()
    """Upstream advice: tag at most one security group per cluster, or instances get all of them."""
    key: str = "karpenter.sh/discovery"


class DiscoveryTags(pulumi.ComponentResource):
    tag_ids: pulumi.Output[list[str]]

    def __init__(self, name: str, args: DiscoveryTagsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if not args.subnet_ids and not args.security_group_ids:
            raise ValueError(f"DiscoveryTags {name!r}: give subnet_ids and/or security_group_ids")
        if not args.key:
            raise ValueError(f"DiscoveryTags {name!r}: key is empty")
        super().__init__("karpy:index:DiscoveryTags", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = [
            aws.ec2.Tag(f"{name}-{kind}-{index}", resource_id=resource_id, key=args.key, value=args.value, opts=child)
            for kind, ids in (("subnet", args.subnet_ids), ("sg", args.security_group_ids))
            for index, resource_id in enumerate(ids)
        ]
        self.tag_ids = pulumi.Output.all(*[tag.id for tag in tags])
        self.register_outputs({"tag_ids": self.tag_ids})
