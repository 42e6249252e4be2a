"""`DiscoveryTags`: tag existing subnets and security groups so EC2NodeClass selectors find them.

Uses `aws.ec2.Tag` (one tag on a resource someone else manages) rather than adopting the subnets or groups, so a
VPC owned by another stack or tool is not taken over. Token `karpy:index:DiscoveryTags`. Annotations stay
resolvable (no `from __future__ import annotations`): Pulumi's component analyzer reads them.
"""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

DEFAULT_KEY = "karpenter.sh/discovery"


class DiscoveryTagsArgs(TypedDict):
    """The subnets and security groups to tag, and the tag."""

    value: pulumi.Input[str]
    """Tag value, usually the cluster name (matched by `subnetSelectorTerms[].tags`)."""
    subnet_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Subnets the nodes may be launched in."""
    security_group_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Upstream advice: tag at most one security group per cluster, or instances get all of them."""
    key: NotRequired[str]
    """Tag key; default karpenter.sh/discovery."""


class DiscoveryTags(pulumi.ComponentResource):
    """One `aws.ec2.Tag` per subnet and security group."""

    tag_ids: pulumi.Output[list[str]]
    """IDs of the tags created."""

    def __init__(self, name: str, args: DiscoveryTagsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        subnet_ids = list(args.get("subnet_ids") or ())
        security_group_ids = list(args.get("security_group_ids") or ())
        key = args.get("key") or DEFAULT_KEY
        if not subnet_ids and not security_group_ids:
            raise ValueError(f"DiscoveryTags {name!r}: give subnet_ids and/or security_group_ids")
        super().__init__("karpy:index:DiscoveryTags", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = [
            aws.ec2.Tag(f"{name}-{kind}-{index}", resource_id=resource_id, key=key, value=args["value"], opts=child)
            for kind, ids in (("subnet", subnet_ids), ("sg", security_group_ids))
            for index, resource_id in enumerate(ids)
        ]
        self.tag_ids = pulumi.Output.all(*[tag.id for tag in tags])
        self.register_outputs({"tag_ids": self.tag_ids})
