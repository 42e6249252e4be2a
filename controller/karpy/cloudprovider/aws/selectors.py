"""EC2NodeClass selector terms → EC2 Describe* filters, and describe results → status entries. Pure.

Terms are ORed, fields within a term ANDed; a tag value "*" means "has the key" (aws: pkg/providers/subnet,
securitygroup, amifamily).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import fleet


def tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for key, value in sorted(tags.items()):
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out


def subnet_filters(term: ec2nodeclass.SubnetSelectorTerm) -> list[dict[str, Any]]:
    filters = tag_filters(term.tags)
    if term.id:
        filters.append({"Name": "subnet-id", "Values": [term.id]})
    return filters


def security_group_filters(term: ec2nodeclass.SecurityGroupSelectorTerm) -> list[dict[str, Any]]:
    filters = tag_filters(term.tags)
    if term.id:
        filters.append({"Name": "group-id", "Values": [term.id]})
    if term.name:
        filters.append({"Name": "group-name", "Values": [term.name]})
    if term.vpc_id:
        # Group names are unique per VPC only: the VPC pins a name (or tag) match to one group.
        filters.append({"Name": "vpc-id", "Values": [term.vpc_id]})
    return filters


def image_query(term: ec2nodeclass.AMISelectorTerm) -> dict[str, Any]:
    """DescribeImages arguments for a non-alias, non-SSM term."""
    filters = tag_filters(term.tags)
    if term.id:
        filters.append({"Name": "image-id", "Values": [term.id]})
    if term.name:
        filters.append({"Name": "name", "Values": [term.name]})
    query: dict[str, Any] = {"Filters": filters}
    if term.owner:
        query["Owners"] = [term.owner]
    elif term.name and not term.id:
        # A bare name could match anyone's public image: upstream restricts to self and amazon.
        query["Owners"] = ["self", "amazon"]
    return query


def subnets_from_describe(described: Iterable[Mapping[str, Any]]) -> list[fleet.Subnet]:
    """Unique subnets (available ones only), ordered by id for stable status output."""
    seen: dict[str, fleet.Subnet] = {}
    for s in described:
        if s.get("State", "available") != "available":
            continue
        seen[s["SubnetId"]] = fleet.Subnet(
            id=s["SubnetId"],
            zone=s["AvailabilityZone"],
            zone_id=s.get("AvailabilityZoneId", ""),
            available_ips=int(s.get("AvailableIpAddressCount", 0)),
        )
    return [seen[k] for k in sorted(seen)]


def security_groups_from_describe(
    described: Iterable[Mapping[str, Any]],
) -> list[ec2nodeclass.SecurityGroupStatus]:
    seen = {
        g["GroupId"]: ec2nodeclass.SecurityGroupStatus(id=g["GroupId"], name=g.get("GroupName", "")) for g in described
    }
    return [seen[k] for k in sorted(seen)]


def describe_terms(terms: Iterable[object]) -> str:
    """Selector terms as the user wrote them, for status messages."""
    parts = []
    for term in terms:
        fields = {k: getattr(term, k) for k in getattr(term, "__slots__", ()) if getattr(term, k)}
        parts.append(
            "{" + ", ".join(f"{k}: {dict(v) if isinstance(v, Mapping) else v}" for k, v in fields.items()) + "}"
        )
    return "[" + ", ".join(parts) + "]"
