"""EC2NodeClass selector terms (subnets, security groups, capacity reservations, AMIs) and the AMI alias rules
tying `amiSelectorTerms` to `amiFamily`, after aws:pkg/apis/v1/ec2nodeclass.go: `karpy.api.schema.ec2nodeclass`
assembles them into the spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.api import ec2nodeclass
from karpy.api.schema import common, core

ALIAS_FAMILIES: Final = tuple(ec2nodeclass.ALIAS_FAMILIES)
WINDOWS_ALIAS_FAMILIES: Final = tuple(f for f in ALIAS_FAMILIES if f.startswith("windows"))


def _quoted(items: tuple[str, ...]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def _selector_tags(description: str) -> core.Schema:
    return core.string_map(
        description,
        max_properties=20,
        rules=(
            core.Rule(
                "self.all(k, k != '' && self[k] != '')",
                "empty tag keys or values aren't supported",
                lambda tags: all(k != "" and v != "" for k, v in tags.items()),
            ),
        ),
    )


def _has(term: Mapping[str, Any], *fields: str) -> bool:
    return any(f in term for f in fields)


def subnets() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the subnet id in EC2", pattern="subnet-[0-9a-z]+"),
            "tags": _selector_tags("Tags is a map of key/value tags used to select subnets."),
        },
        "SubnetSelectorTerm defines selection logic for a subnet used by Karpenter to launch nodes.",
    )
    return core.array(
        term,
        "SubnetSelectorTerms is a list of subnet selector terms. The terms are ORed.",
        max_items=30,
        rules=(
            core.Rule("self.size() != 0", "subnetSelectorTerms cannot be empty", lambda terms: len(terms) != 0),
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id))",
                "expected at least one, got none, ['tags', 'id']",
                lambda terms: all(_has(t, "tags", "id") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && has(x.tags))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector "
                "term",
                lambda terms: not all("id" in t and "tags" in t for t in terms),
            ),
        ),
    )


def security_groups() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the security group id in EC2", pattern="sg-[0-9a-z]+"),
            "name": core.string("Name is the security group name in EC2 (the GroupName, not the Name tag)."),
            "tags": _selector_tags("Tags is a map of key/value tags used to select security groups."),
            "vpcID": core.string(
                "VPCID restricts the term to security groups of this VPC (for names reused across VPCs).",
                pattern="vpc-[0-9a-z]+",
            ),
        },
        "SecurityGroupSelectorTerm defines selection logic for a security group used by Karpenter to launch nodes.",
    )
    return core.array(
        term,
        "SecurityGroupSelectorTerms is a list of security group selector terms. The terms are ORed.",
        max_items=30,
        rules=(
            core.Rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty", lambda terms: len(terms) != 0),
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                "expected at least one, got none, ['tags', 'id', 'name']",
                lambda terms: all(_has(t, "tags", "id", "name") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
                lambda terms: not all("id" in t and _has(t, "tags", "name") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
                lambda terms: not all("name" in t and _has(t, "tags", "id") for t in terms),
            ),
        ),
    )


def capacity_reservations() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the capacity reservation id in EC2", pattern="^cr-[0-9a-z]+$"),
            "instanceMatchCriteria": core.string(
                "InstanceMatchCriteria specifies how instances are matched to capacity reservations.",
                enum=("open", "targeted"),
            ),
            "ownerID": core.string("Owner is the owner id for the ami.", pattern="^[0-9]{12}$"),
            "tags": _selector_tags("Tags is a map of key/value tags used to select capacity reservations."),
        }
    )
    return core.array(
        term,
        "CapacityReservationSelectorTerms is a list of capacity reservation selector terms.",
        max_items=30,
        rules=(
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
                lambda terms: all(_has(t, "tags", "id", "instanceMatchCriteria") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector "
                "term",
                lambda terms: not all("id" in t and _has(t, "tags", "ownerID", "instanceMatchCriteria") for t in terms),
            ),
        ),
    )


def _alias_family(alias: str) -> str:
    return alias.split("@")[0]


def amis() -> core.Schema:
    alias = core.string(
        "Alias specifies which EKS optimized AMI to select, as 'family@version'.",
        max_length=30,
        rules=(
            core.Rule(
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'",
                lambda value: common.re_search(r"^[a-zA-Z0-9]+@.+$", value),
            ),
            core.Rule(
                f"self.split('@')[0] in [{_quoted(ALIAS_FAMILIES).replace(' ', '')}]",
                f"family is not supported, must be one of the following: {_quoted(ALIAS_FAMILIES)}",
                lambda value: _alias_family(value) in ALIAS_FAMILIES,
            ),
            core.Rule(
                f"self.split('@')[0] in [{_quoted(WINDOWS_ALIAS_FAMILIES).replace(' ', '')}] ? "
                "self.split('@')[1] == 'latest' : true",
                "windows families may only specify version 'latest'",
                lambda value: _alias_family(value) not in WINDOWS_ALIAS_FAMILIES or value.split("@")[1] == "latest",
            ),
        ),
    )
    term = core.obj(
        {
            "alias": alias,
            "id": core.string("ID is the ami id in EC2", pattern="ami-[0-9a-z]+"),
            "name": core.string("Name is the ami name in EC2 (the name field, not the Name tag)."),
            "owner": core.string("Owner is the owner for the ami: an account id, self, amazon or aws-marketplace."),
            "ssmParameter": core.string("SSMParameter is the name (or ARN) of the SSM parameter holding the image ID."),
            "tags": _selector_tags("Tags is a map of key/value tags used to select amis."),
        }
    )
    return core.array(
        term,
        "AMISelectorTerms is a list of or ami selector terms. The terms are ORed.",
        min_items=1,
        max_items=30,
        rules=(
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                lambda terms: all(_has(t, "tags", "id", "name", "alias", "ssmParameter") for t in terms),
            ),
            core.Rule(
                "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                lambda terms: not any("id" in t and _has(t, "alias", "tags", "name", "owner") for t in terms),
            ),
            core.Rule(
                "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                lambda terms: not any("alias" in t and _has(t, "id", "tags", "name", "owner") for t in terms),
            ),
            core.Rule(
                "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
                lambda terms: not (any("alias" in t for t in terms) and len(terms) != 1),
            ),
        ),
    )


def _alias_rule(alias_family: str, family: str) -> core.Rule:
    article = "an" if family[0] in "AEIOU" else "a"

    def check(spec: dict[str, Any]) -> bool:
        uses = any(_alias_family(t.get("alias", "")) == alias_family for t in spec["amiSelectorTerms"] if "alias" in t)
        return "amiFamily" not in spec or not uses or spec["amiFamily"] in ("Custom", family)

    return core.Rule(
        f"!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == "
        f"'{alias_family}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)",
        f"if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias",
        check,
    )


def alias_rules() -> tuple[core.Rule, ...]:
    """One spec rule per alias family: an alias of that family requires amiFamily unset, Custom or that family."""
    return tuple(_alias_rule(alias, family.value) for alias, family in ec2nodeclass.ALIAS_FAMILIES.items())
