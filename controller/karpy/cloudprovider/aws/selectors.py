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


def term_filters(tags: Mapping[str, str], fields: Mapping[str, str]) -> list[dict[str, Any]]:
    """A term's tag filters, then one equality filter per field the term sets, by filter name in `fields`' order
    (a field left "" filters nothing)."""
    return [*tag_filters(tags), *({"Name": name, "Values": [value]} for name, value in fields.items() if value)]


def subnet_filters(term: ec2nodeclass.SubnetSelectorTerm) -> list[dict[str, Any]]:
    return term_filters(term.tags, {"subnet-id": term.id})


def security_group_filters(term: ec2nodeclass.SecurityGroupSelectorTerm) -> list[dict[str, Any]]:
    # Group names are unique per VPC only: the VPC pins a name (or tag) match to one group.
    return term_filters(term.tags, {"group-id": term.id, "group-name": term.name, "vpc-id": term.vpc_id})


def image_query(term: ec2nodeclass.AMISelectorTerm) -> dict[str, Any]:
    """DescribeImages arguments for a non-alias, non-SSM term."""
    query: dict[str, Any] = {"Filters": term_filters(term.tags, {"image-id": term.id, "name": term.name})}
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
