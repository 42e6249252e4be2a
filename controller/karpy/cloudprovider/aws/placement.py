"""spec.placementGroupSelector → DescribePlacementGroups query, and the answer → the group to launch into. Pure.

A placement group is named by exactly one of its name or its `pg-` id; it is usable only while `available`
(aws: pkg/providers/placementgroup, pkg/controllers/nodeclass/placementgroup.go).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import ec2nodeclass

AVAILABLE = "available"


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    id: str
    name: str
    strategy: str  # cluster | partition | spread
    state: str
    partition_count: int = 0
    spread_level: str = ""


def query(selector: ec2nodeclass.PlacementGroupSelector) -> dict[str, Any]:
    """DescribePlacementGroups arguments for the selector (by id when given, else by name)."""
    if selector.id:
        return {"GroupIds": [selector.id]}
    return {"GroupNames": [selector.name]}


def from_describe(described: Iterable[Mapping[str, Any]]) -> PlacementGroup | None:
    """The first described group, or None when EC2 knows none."""
    for group in described:
        return PlacementGroup(
            id=str(group.get("GroupId", "")),
            name=str(group.get("GroupName", "")),
            strategy=str(group.get("Strategy", "")),
            state=str(group.get("State", "")),
            partition_count=int(group.get("PartitionCount") or 0),
            spread_level=str(group.get("SpreadLevel") or ""),
        )
    return None


def readiness(selector: ec2nodeclass.PlacementGroupSelector, found: PlacementGroup | None) -> str:
    """Empty when the group can be launched into, else why not (the PlacementGroupReady message)."""
    wanted = f"id {selector.id}" if selector.id else f"name {selector.name}"
    if found is None:
        return f"no placement group matched {wanted}"
    if found.state != AVAILABLE:
        return f"placement group {found.name or found.id} is {found.state or 'in an unknown state'}, not {AVAILABLE}"
    return ""
