"""Instance types a node class can launch: EC2 shapes (5 min cache) × its subnets' zones × capacity types, priced,
with offerings marked unavailable while they sit in the ICE cache (aws: pkg/providers/instancetype).

Shape → `InstanceType` conversion is `karpy.cloudprovider.ec2shapes` (shared with the bundled catalog).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import ec2shapes, heap, shapefields, types
from karpy.cloudprovider.aws import cache, clients, pricing, zonalshift

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShapeSettings:
    region: str
    vm_memory_overhead_percent: float = ec2shapes.DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    reserved_enis: int = 0


def offerings_for(
    name: str,
    *,
    zones: Sequence[tuple[str, str]],
    offered_zones: frozenset[str],
    prices: pricing.PricingProvider,
    unavailable: cache.UnavailableOfferings,
    shifted: frozenset[str] = frozenset(),
    compatible: bool = True,
) -> list[types.Offering]:
    """One offering per (zone the type is offered in ∩ node class zones) × (on-demand, spot), priced; unavailable in
    a zone whose id is in `shifted`, and everywhere when the type is not `compatible` with the node class (aws:
    pkg/providers/instancetype/offering/base_resolver.go)."""
    out = []
    od_price = prices.on_demand_price(name)
    for zone, zone_id in zones:
        if zone not in offered_zones:
            continue
        for capacity_type in (labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT):
            if capacity_type == labels.CAPACITY_TYPE_SPOT:
                price = prices.spot_price(name, zone)
                price = od_price if price is None else price
            else:
                price = od_price
            if price is None:
                continue  # an unpriced offering cannot be ranked: upstream drops it
            out.append(
                types.Offering(
                    zone=zone,
                    capacity_type=capacity_type,
                    price=price,
                    available=compatible
                    and not unavailable.is_unavailable(name, zone, capacity_type)
                    and zone_id not in shifted,
                    zone_id=zone_id,
                )
            )
    return out


# Reserved capacity is already paid for: priced a ten-millionth of on-demand so it always ranks first, while
# reservations of different types keep their on-demand order among themselves.
RESERVED_PRICE_FACTOR = 1e-7

# Page sizes as upstream asks them (pkg/providers/instancetype/instancetype.go), EC2's largest: DescribeInstanceTypes
# takes at most 100 (botocore's model: DITMaxResults), DescribeInstanceTypeOfferings 1,000 (DITOMaxResults). Paged,
# the shapes are compacted 100 at a time, so the parse of all ~1,400 raw records is never held at once.
DESCRIBE_TYPES_PAGE: Final = 100
DESCRIBE_OFFERINGS_PAGE: Final = 1000


def reserved_offerings(
    name: str,
    *,
    reservations: Sequence[ec2nodeclass.CapacityReservationStatus],
    zones: Sequence[tuple[str, str]],
    od_price: float | None,
    unavailable: cache.UnavailableOfferings,
    shifted: frozenset[str] = frozenset(),
    compatible: bool = True,
) -> list[types.Offering]:
    """One `reserved` offering per resolved reservation of this type in one of the node class's zones (unavailable
    when the type is not `compatible` with the node class, as upstream's reserved_capacity_resolver.go)."""
    zone_ids = dict(zones)
    out = []
    for cr in reservations:
        if cr.instance_type != name or cr.availability_zone not in zone_ids or od_price is None:
            continue
        out.append(
            types.Offering(
                zone=cr.availability_zone,
                capacity_type=labels.CAPACITY_TYPE_RESERVED,
                price=od_price * RESERVED_PRICE_FACTOR,
                # Looked up under the reservation's own id: unavailable once it has no instances left, or once it
                # is an expiring capacity block, or its zone is shifted (upstream's reserved_capacity_resolver.go).
                available=compatible
                and cr.state != ec2nodeclass.CAPACITY_RESERVATION_EXPIRING
                and not unavailable.is_unavailable(name, cr.availability_zone, cr.id)
                and zone_ids[cr.availability_zone] not in shifted,
                zone_id=zone_ids[cr.availability_zone],
                reservation_id=cr.id,
                reservation_capacity=unavailable.reservation_left(cr.id) or 0,
            )
        )
    return out


def build_catalog(
    shapes: Sequence[Mapping[str, Any]],
    *,
    offered: Mapping[str, frozenset[str]],
    nodeclass: ec2nodeclass.EC2NodeClass,
    settings: ShapeSettings,
    prices: pricing.PricingProvider,
    unavailable: cache.UnavailableOfferings,
    eni_limits: Callable[[str], Mapping[str, Any] | None],
    shifted: frozenset[str] = frozenset(),
) -> list[types.InstanceType]:
    """Every shape the node class's AMI family can run, with offerings in the node class's zones (none available
    in a zone id of `shifted`)."""
    family = nodeclass.resolved_ami_family
    kubelet = ec2shapes.KubeletOverrides.from_config(nodeclass.spec.kubelet) if nodeclass.spec.kubelet else None
    zones = sorted({(s.zone, s.zone_id) for s in nodeclass.status.subnets})
    out = []
    for info in shapes:
        if not ec2shapes.supports(info, ami_family=family):
            continue
        name = str(info["InstanceType"])
        # Offered but unavailable, as upstream, when the shape cannot take the class's network interfaces.
        compatible = ec2shapes.network_interfaces_fit(info, network_interfaces=nodeclass.spec.network_interfaces)
        offerings = offerings_for(
            name,
            zones=zones,
            offered_zones=offered.get(name, frozenset()),
            prices=prices,
            unavailable=unavailable,
            shifted=shifted,
            compatible=compatible,
        )
        offerings += reserved_offerings(
            name,
            reservations=nodeclass.status.capacity_reservations,
            zones=zones,
            od_price=prices.on_demand_price(name),
            unavailable=unavailable,
            shifted=shifted,
            compatible=compatible,
        )
        if not offerings:
            continue  # not offered in any of the node class's zones (or unpriced): nothing to launch
        root = ec2shapes.ephemeral_storage(
            info,
            ami_family=family,
            block_device_mappings=nodeclass.spec.block_device_mappings,
            instance_store_policy=nodeclass.spec.instance_store_policy,
        )
        out.append(
            ec2shapes.instance_type_from_ec2(
                info,
                offerings=offerings,
                eni_limits=eni_limits(name),
                kubelet=kubelet,
                vm_memory_overhead_percent=settings.vm_memory_overhead_percent,
                reserved_enis=settings.reserved_enis,
                ami_family=family,
                root_volume=root,
                region=settings.region,
                network_interfaces=nodeclass.spec.network_interfaces,
            )
        )
    return out


def nodeclass_key(nodeclass: ec2nodeclass.EC2NodeClass) -> str:
    """What the built catalog depends on in a node class: family, kubelet, storage, network interfaces and zones."""
    spec = nodeclass.spec
    parts = (
        nodeclass.name,
        nodeclass.resolved_ami_family.value,
        repr(spec.kubelet),
        repr(spec.block_device_mappings),
        spec.instance_store_policy,
        repr(spec.network_interfaces),
        repr(sorted((s.zone, s.zone_id) for s in nodeclass.status.subnets)),
        repr(sorted(nodeclass.status.capacity_reservations, key=lambda cr: cr.id)),
    )
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


class InstanceTypeProvider:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        clock: karpy_clock.Now,
        settings: ShapeSettings,
        prices: pricing.PricingProvider,
        unavailable: cache.UnavailableOfferings,
        eni_limits: Callable[[str], Mapping[str, Any] | None],
        zonal_shifts: zonalshift.ZonalShifts,
    ) -> None:
        self._aws = aws
        self._described = False
        """Shapes or offerings were described since the last build: the heap is trimmed after the next one."""
        self._zonal_shifts = zonal_shifts
        self._settings = settings
        self._prices = prices
        self._unavailable = unavailable
        self._eni_limits = eni_limits
        self._shapes: cache.TTLCache[str, tuple[Mapping[str, Any], ...]] = cache.TTLCache(
            cache.INSTANCE_TYPES_TTL, clock=clock
        )
        self._offered: cache.TTLCache[str, Mapping[str, frozenset[str]]] = cache.TTLCache(
            cache.INSTANCE_TYPES_TTL, clock=clock
        )
        self._built: cache.TTLCache[tuple[str, int, int, frozenset[str]], tuple[types.InstanceType, ...]]
        self._built = cache.TTLCache(cache.INSTANCE_TYPES_TTL, clock=clock)
        self._building = asyncio.Lock()

    async def shapes(self) -> tuple[Mapping[str, Any], ...]:
        """Every DescribeInstanceTypes record, compacted page by page to the fields the catalog reads
        (`shapefields`): the parsed records are never all held at once, nor kept."""
        cached = self._shapes.get("all")
        if cached is None:
            self._shapes.delete("all")  # expired: not kept alive through the describe that replaces it
            described: list[Mapping[str, Any]] = []
            await clients.fold_pages(
                self._aws.ec2,
                "describe_instance_types",
                "InstanceTypes",
                consume=lambda page: described.extend(shapefields.compact(info) for info in page),
                MaxResults=DESCRIBE_TYPES_PAGE,
            )
            cached = tuple(described)
            self._shapes.set("all", cached)
            self._described = True
        return cached

    async def offered_zones(self) -> Mapping[str, frozenset[str]]:
        cached = self._offered.get("all")
        if cached is None:
            self._offered.delete("all")
            zones: dict[str, set[str]] = {}

            def add(page: Sequence[Mapping[str, Any]]) -> None:
                for row in page:
                    zone = sys.intern(str(row["Location"]))
                    zones.setdefault(sys.intern(str(row["InstanceType"])), set()).add(zone)

            await clients.fold_pages(
                self._aws.ec2,
                "describe_instance_type_offerings",
                "InstanceTypeOfferings",
                consume=add,
                LocationType="availability-zone",
                MaxResults=DESCRIBE_OFFERINGS_PAGE,
            )
            # Types offered in the same zones share one set: a region has a few distinct sets for ~1,400 types.
            distinct: dict[frozenset[str], frozenset[str]] = {}
            cached = {name: distinct.setdefault(frozenset(found), frozenset(found)) for name, found in zones.items()}
            self._offered.set("all", cached)
            self._described = True
        return cached

    async def list(self, nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[types.InstanceType, ...]:
        await self._prices.ensure_fresh()
        self._unavailable.expire()
        await self._zonal_shifts.ensure_hydrated()
        # One build at a time: callers arriving during a build (the provisioner, the nodeclass and price loops at
        # start) wait for it and take it from the cache, rather than each building and holding a catalog of its own.
        async with self._building:
            return await self._listed(nodeclass)

    async def _listed(self, nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[types.InstanceType, ...]:
        shifted = self._zonal_shifts.shifted_zones()  # a shift starting or ending builds the catalog again
        key = (nodeclass_key(nodeclass), self._unavailable.seq, self._prices.seq, shifted)
        built = self._built.get(key)
        if built is None:
            # Before the build: the catalogs no lookup can reach any more are not kept alive through it.
            self._built.expire()
            self._forget_superseded(key)
            built = tuple(
                build_catalog(
                    await self.shapes(),
                    offered=await self.offered_zones(),
                    nodeclass=nodeclass,
                    settings=self._settings,
                    prices=self._prices,
                    unavailable=self._unavailable,
                    eni_limits=self._eni_limits,
                    shifted=shifted,
                )
            )
            self._built.set(key, built)
            if self._described:  # at most once per describe (5 min), not on every rebuild an ICE mark asks for
                self._described = False
                heap.release()
        return built

    def _forget_superseded(self, key: tuple[str, int, int, frozenset[str]]) -> None:
        """Drop this node class's catalogs built before the last ICE mark or price refresh: both sequence numbers
        only grow, so no lookup can reach them again, and each holds a whole catalog until its TTL (measured: the
        second copy was ~5 MB of the controller's start-up RSS)."""
        for old, _ in self._built.items():
            if old[0] == key[0] and old[1:3] != key[1:3]:
                self._built.delete(old)
