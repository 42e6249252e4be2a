"""Choosing what to ask CreateFleet for, and building the request: pure functions.

Order of the filters follows upstream (aws: pkg/providers/instance/filter/filter.go, instance.go): compatible and
available → exotic types dropped if generic ones remain → spot offerings dearer than the cheapest on-demand one
dropped → cheapest 60 types. Then the capacity type is chosen and the overrides are the cross product of the
remaining types with the zonal subnet that has the most free addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import labels
from karpy.cloudprovider import types

MAX_INSTANCE_TYPES = 60
# Below this many types, choosing on-demand while spot was allowed deserves a warning (upstream constant).
INSTANCE_TYPE_FLEXIBILITY_THRESHOLD = 5
SPOT_ALLOCATION_STRATEGY = "price-capacity-optimized"
ON_DEMAND_ALLOCATION_STRATEGY = "lowest-price"
# With NodeOverlay prices EC2's own price list would undo them: the overrides are ranked by their Priority (the
# overlaid price) instead (aws: pkg/providers/instance/types.go WithOverlay).
SPOT_PRIORITIZED_STRATEGY = "capacity-optimized-prioritized"
ON_DEMAND_PRIORITIZED_STRATEGY = "prioritized"
CAPACITY_BLOCK_TARGET = "capacity-block"

_EXOTIC_RESOURCES = (
    labels.RESOURCE_NVIDIA_GPU,
    labels.RESOURCE_AMD_GPU,
    labels.RESOURCE_AWS_NEURON,
    labels.RESOURCE_AWS_NEURON_CORE,
    labels.RESOURCE_HABANA_GAUDI,
)


@dataclass(frozen=True, slots=True)
class Subnet:
    """A resolved subnet with what launch placement needs."""

    id: str
    zone: str
    zone_id: str = ""
    available_ips: int = 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """An instance type and the offerings of it this launch may use."""

    instance_type: types.InstanceType
    offerings: tuple[types.Offering, ...]

    def cheapest(self, capacity_type: str | None = None) -> float:
        prices = [o.price for o in self.offerings if capacity_type is None or o.capacity_type == capacity_type]
        return min(prices) if prices else float("inf")


@dataclass(frozen=True, slots=True)
class Override:
    instance_type: str
    subnet_id: str
    zone: str
    price: float
    image_id: str = ""


@dataclass(frozen=True, slots=True)
class LaunchTemplateOverrides:
    launch_template_name: str
    overrides: tuple[Override, ...]


def candidates(
    instance_types: Iterable[types.InstanceType],
    *,
    type_compatible: Callable[[types.InstanceType], bool],
    offering_compatible: Callable[[types.Offering], bool],
    requests: Mapping[str, int],
) -> list[Candidate]:
    """Types that satisfy the requirements, fit the requests and have a compatible available offering."""
    out = []
    for it in instance_types:
        if not type_compatible(it):
            continue
        if any(it.allocatable.get(name, 0) < amount for name, amount in requests.items()):
            continue
        offerings = tuple(o for o in it.offerings if o.available and offering_compatible(o))
        if offerings:
            out.append(Candidate(it, offerings))
    return out


def is_exotic(it: types.InstanceType) -> bool:
    """Metal, GPU, Neuron and Gaudi types are only launched when nothing generic fits."""
    return "metal" in it.name or any(it.capacity.get(r, 0) > 0 for r in _EXOTIC_RESOURCES)


def filter_exotic(cands: Sequence[Candidate], *, has_min_values: bool) -> list[Candidate]:
    if has_min_values:
        return list(cands)
    generic = [c for c in cands if not is_exotic(c.instance_type)]
    return generic or list(cands)


def filter_spot_offerings(cands: Sequence[Candidate], *, has_min_values: bool) -> list[Candidate]:
    """Drop spot offerings priced above the cheapest on-demand offering when both are possible."""
    if has_min_values:
        return list(cands)
    od = [o.price for c in cands for o in c.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND]
    has_spot = any(o.capacity_type == labels.CAPACITY_TYPE_SPOT for c in cands for o in c.offerings)
    if not od or not has_spot:
        return list(cands)
    ceiling = min(od)
    out = []
    for c in cands:
        kept = tuple(o for o in c.offerings if o.capacity_type != labels.CAPACITY_TYPE_SPOT or o.price <= ceiling)
        if kept:
            out.append(Candidate(c.instance_type, kept))
    return out


def choose_capacity_type(cands: Sequence[Candidate]) -> str | None:
    """reserved if any reserved offering, else spot if any spot offering, else on-demand (None if nothing)."""
    present = {o.capacity_type for c in cands for o in c.offerings}
    for capacity_type in (labels.CAPACITY_TYPE_RESERVED, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND):
        if capacity_type in present:
            return capacity_type
    return None


def truncate(cands: Sequence[Candidate], *, capacity_type: str, limit: int = MAX_INSTANCE_TYPES) -> list[Candidate]:
    """The `limit` cheapest candidates that have an offering of `capacity_type`, cheapest first, name breaks ties."""
    usable = [
        Candidate(c.instance_type, tuple(o for o in c.offerings if o.capacity_type == capacity_type)) for c in cands
    ]
    usable = [c for c in usable if c.offerings]
    usable.sort(key=lambda c: (c.cheapest(), c.instance_type.name))
    return usable[:limit]


def by_reservation(offerings: Iterable[types.Offering]) -> dict[str, tuple[types.Offering, ...]]:
    """Offerings grouped by reservation id ("" for the non-reserved ones), in first-seen order."""
    out: dict[str, list[types.Offering]] = {}
    for offering in offerings:
        out.setdefault(offering.reservation_id, []).append(offering)
    return {k: tuple(v) for k, v in out.items()}


def one_reservation_kind(cands: Sequence[Candidate], *, blocks: frozenset[str]) -> tuple[list[Candidate], bool]:
    """A fleet buys either capacity blocks or ordinary reservations: ordinary ones are kept when both are present
    (upstream's CapacityBlockFilter). Returns the candidates and whether they are capacity blocks."""
    ordinary = [
        Candidate(c.instance_type, kept)
        for c in cands
        if (kept := tuple(o for o in c.offerings if o.reservation_id not in blocks))
    ]
    if ordinary:
        return ordinary, False
    return list(cands), bool(cands)


def zonal_subnets(
    subnets: Iterable[Subnet],
    *,
    unavailable: frozenset[str] = frozenset(),
    inflight: Mapping[str, int] | None = None,
) -> dict[str, Subnet]:
    """Per zone, the subnet with the most free addresses once the ones claimed by launches in flight are taken
    off; subnets known to be full only if nothing else."""

    claimed = inflight or {}

    def rank(subnet: Subnet) -> tuple[bool, int, str]:
        return (subnet.id not in unavailable, subnet.available_ips - claimed.get(subnet.id, 0), subnet.id)

    best: dict[str, Subnet] = {}
    for subnet in subnets:
        current = best.get(subnet.zone)
        if current is None or rank(subnet) > rank(current):
            best[subnet.zone] = subnet
    return best


def predicted_ips(cands: Sequence[Candidate]) -> int:
    """Addresses one launch is expected to take from its subnet: the fewest pods any candidate type can run (each
    pod gets a VPC address), as upstream predicts before it knows which type EC2 picks."""
    pods = [c.instance_type.capacity.get(labels.RESOURCE_PODS, 0) // 1000 for c in cands]
    return min(pods, default=0)


def overrides(
    cands: Sequence[Candidate],
    *,
    subnets_by_zone: Mapping[str, Subnet],
    image_for: Callable[[types.InstanceType], str] = lambda _: "",
) -> tuple[Override, ...]:
    """One override per (type, zone) offering whose zone has a subnet; priced so upstream's Priority works."""
    out = []
    for c in cands:
        for offering in sorted(c.offerings, key=lambda o: o.zone):
            subnet = subnets_by_zone.get(offering.zone)
            if subnet is None:
                continue
            out.append(
                Override(
                    instance_type=c.instance_type.name,
                    subnet_id=subnet.id,
                    zone=offering.zone,
                    price=offering.price,
                    image_id=image_for(c.instance_type),
                )
            )
    return tuple(out)


def launch_tags(
    *,
    cluster_name: str,
    nodepool: str,
    nodeclass: str,
    user_tags: Mapping[str, str],
) -> dict[str, str]:
    """Tags on every instance, volume, fleet and launch template; ours win over the user's (aws: GetTags).

    Nothing of one NodeClaim: launches of the same shape must send identical CreateFleet requests to be merged
    (`ec2batch`); the `karpenter.sh/nodeclaim` and `Name` tags come after registration, as upstream's."""
    out = dict(user_tags)
    out.update(
        {
            f"{labels.TAG_CLUSTER_PREFIX}{cluster_name}": "owned",
            labels.TAG_EKS_CLUSTER_NAME: cluster_name,
            labels.TAG_NODEPOOL: nodepool,
            labels.TAG_EC2NODECLASS: nodeclass,
        }
    )
    return out


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def build_create_fleet_request(
    launch_templates: Sequence[LaunchTemplateOverrides],
    *,
    capacity_type: str,
    tags: Mapping[str, str],
    context: str = "",
    capacity_block: bool = False,
    prioritized: bool = False,
) -> dict[str, Any]:
    """The CreateFleet input: instant, one instance, one config per launch template with its overrides.

    Reserved capacity is bought as on-demand (the templates target the reservations), capacity blocks as
    `capacity-block`. `prioritized` (a NodeOverlay priced an offering): each override carries its price as its
    Priority and the allocation strategies follow it."""
    target = labels.CAPACITY_TYPE_SPOT if capacity_type == labels.CAPACITY_TYPE_SPOT else "on-demand"
    if capacity_type == labels.CAPACITY_TYPE_RESERVED and capacity_block:
        target = CAPACITY_BLOCK_TARGET
    request: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": target},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": lt.launch_template_name, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": o.instance_type,
                        "SubnetId": o.subnet_id,
                        "AvailabilityZone": o.zone,
                        **({"ImageId": o.image_id} if o.image_id else {}),
                        **({"Priority": o.price} if prioritized else {}),
                    }
                    for o in lt.overrides
                ],
            }
            for lt in launch_templates
            if lt.overrides
        ],
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("instance", "volume", "fleet")
        ],
    }
    if target == labels.CAPACITY_TYPE_SPOT:
        strategy = SPOT_PRIORITIZED_STRATEGY if prioritized else SPOT_ALLOCATION_STRATEGY
        request["SpotOptions"] = {"AllocationStrategy": strategy}
    else:
        strategy = ON_DEMAND_PRIORITIZED_STRATEGY if prioritized else ON_DEMAND_ALLOCATION_STRATEGY
        request["OnDemandOptions"] = {"AllocationStrategy": strategy}
    if context:
        request["Context"] = context
    return request
