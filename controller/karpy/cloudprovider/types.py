"""The cloud-provider contract: `CloudProvider`, `InstanceType`, `Offering`, drift reasons, repair policies.

Amounts are milli-units (see `karpy.api.quantity`). Prices are US dollars per hour.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpy import requirements
from karpy.api import labels, nodeclaim, nodepool


@dataclass(frozen=True, slots=True)
class Offering:
    """Where and how an instance type can be bought: one zone × capacity type (× reservation)."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""
    reservation_id: str = ""
    reservation_capacity: int = 0
    """Instances the reservation can still take, as far as this process knows (0: unknown or none)."""
    price_overlaid: bool = False
    """`price` comes from a NodeOverlay (`karpy.cloudprovider.overlay`), not from the provider's price list."""

    def labels(self) -> dict[str, str]:
        out = {labels.LABEL_ZONE: self.zone, labels.LABEL_CAPACITY_TYPE: self.capacity_type}
        if self.zone_id:
            out[labels.LABEL_ZONE_ID] = self.zone_id
        if self.reservation_id:
            out[labels.LABEL_CAPACITY_RESERVATION_ID] = self.reservation_id
        return out


@dataclass(frozen=True, slots=True)
class Overhead:
    """What the kubelet keeps back from capacity; allocatable = capacity − kube − system − eviction."""

    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def total(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for key, value in part.items():
                out[key] = out.get(key, 0) + value
        return out


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A machine shape with its single-valued labels, capacity, overhead and offerings.

    `labels` holds every well-known label whose value is fixed by the shape (arch, os, instance-type, family,
    cpu, memory, gpu, ...). Labels that an instance type lacks are "does not exist" for requirement matching.
    Zone and capacity type come from `offerings`.
    """

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, int]
    offerings: tuple[Offering, ...]
    overhead: Overhead = field(default_factory=Overhead)
    capacity_overlaid: bool = False
    """`capacity` holds extended resources a NodeOverlay added (`karpy.cloudprovider.overlay`)."""
    allocatable: Mapping[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        reserved = self.overhead.total()
        alloc = {k: max(0, v - reserved.get(k, 0)) for k, v in self.capacity.items()}
        object.__setattr__(self, "allocatable", alloc)

    def available_offerings(self) -> tuple[Offering, ...]:
        return tuple(o for o in self.offerings if o.available)

    def cheapest_price(self) -> float | None:
        prices = [o.price for o in self.offerings if o.available]
        return min(prices) if prices else None


def _values(instance_type: InstanceType, key: str, req: requirements.Requirement) -> set[str]:
    """What `instance_type` offers for a minValues key: its name, its label when `req` allows it, or (zone and
    capacity type, which come from offerings) its available offerings' values."""
    if key == labels.LABEL_INSTANCE_TYPE:
        return {instance_type.name}
    value = instance_type.labels.get(key)
    if value is not None:
        return {value} if req.has(value) else set()
    if key in (labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE):
        return {o.labels().get(key, "") for o in instance_type.offerings if o.available}
    return set()


def min_values_needed(instance_types: Sequence[InstanceType], reqs: requirements.Requirements) -> int | None:
    """How many of `instance_types`, taken in order, it takes to offer at least minValues distinct values for every
    key of `reqs` that sets one: 0 when none does, None when all of them together fall short (core:
    pkg/cloudprovider/types.go `InstanceTypes.SatisfiesMinValues`). The one minValues rule: the scheduler's fit,
    the repack and consolidation's cheaper options all ask it."""
    wanted = [(key, req, req.min_values) for key, req in reqs.items() if req.min_values is not None]
    if not wanted:
        return 0
    seen: dict[str, set[str]] = {key: set() for key, _, _ in wanted}
    for count, instance_type in enumerate(instance_types, start=1):
        for key, req, _ in wanted:
            seen[key] |= _values(instance_type, key, req)
        if all(len(seen[key]) >= least for key, _, least in wanted):
            return count
    return None


def satisfies_min_values(instance_types: Sequence[InstanceType], reqs: requirements.Requirements) -> bool:
    return min_values_needed(instance_types, reqs) is not None


class DriftReason(enum.StrEnum):
    """Provider-side drift (aws:pkg/cloudprovider/drift.go); core reasons live in the disruption package."""

    NODE_CLASS = "NodeClassDrift"
    AMI = "AMIDrift"
    SUBNET = "SubnetDrift"
    SECURITY_GROUP = "SecurityGroupDrift"
    CAPACITY_RESERVATION = "CapacityReservationDrift"
    PLACEMENT_GROUP = "PlacementGroupDrift"


class SelectorField(enum.StrEnum):
    """The EC2NodeClass selector terms the controller resolves from EC2 (values are the spec's field names)."""

    AMI = "amiSelectorTerms"
    SUBNET = "subnetSelectorTerms"
    SECURITY_GROUP = "securityGroupSelectorTerms"


@dataclass(frozen=True, slots=True)
class SelectorResolution:
    """What an EC2NodeClass's selector terms resolve to, as the controller resolves them for its status; read-only
    (`karpy plan` asks, the AWS provider answers)."""

    ids: Mapping[SelectorField, frozenset[str]] = field(default_factory=dict)
    """The AMIs (the newest per requirement set, as the status lists them), subnets and security groups selected."""
    errors: Mapping[SelectorField, str] = field(default_factory=dict)
    """Why a field could not be resolved (AWS refused, an unknown alias): it is then absent from `ids`."""


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A Node condition the provider calls unhealthy, and how long it is tolerated before the node is replaced
    (core: cloudprovider/types.go RepairPolicy; the NodeRepair gate's controller acts on them)."""

    condition_type: str
    condition_status: str
    """"True", "False" or "Unknown": the status that means unhealthy."""
    toleration: float
    """Seconds the condition may hold (since its lastTransitionTime) before the node is repaired."""


class CloudProvider(Protocol):
    """What the reconcilers need from a cloud. Domain types in and out; errors from `errors`."""

    @property
    def name(self) -> str: ...

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        """Launch capacity for `claim`; return it with provider id, labels, capacity and allocatable resolved.
        `adopt`: an earlier process may have launched it already (its answer never recorded): return the live
        instance launched for it, if there is one, instead of launching another."""
        ...

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        """Terminate the instance; raise `NodeClaimNotFound` once it is gone."""
        ...

    async def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        """The NodeClaim view of one instance; `NodeClaimNotFound` if it does not exist or is terminated."""
        ...

    async def list(self) -> Sequence[nodeclaim.NodeClaim]:
        """Every live instance this cluster launched (by cluster tags)."""
        ...

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[InstanceType]:
        """The instance types (with offerings and prices) that `pool`'s node class can launch."""
        ...

    async def is_drifted(self, claim: nodeclaim.NodeClaim) -> DriftReason | None:
        """Why the instance no longer matches its node class, or None."""
        ...

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """The unhealthy Node conditions node repair acts on; none disables it (as upstream registers no
        health controller for a provider without policies)."""
        ...
