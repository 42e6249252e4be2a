"""NodeOverlays applied to instance types: which overlay changes which offering's price and which type's capacity,
per NodePool, and the conflicts between overlays of equal weight. Pure.

`evaluate` orders the overlays by weight and walks them once over every NodePool's instance types (core:
pkg/controllers/nodeoverlay/controller.go, store.go). An overlay selects a type when the type's requirements (its
labels, the values its offerings carry, the pool's name and template labels) are compatible with the overlay's,
and within it the offerings compatible with them. The first (heaviest) overlay to set an offering's price, or a
capacity resource of a type, wins; a lighter one fills in only what no heavier one set. Two overlays of the same
weight that both set the price of one offering, or the same resource of one type, conflict: the later of the two in
weight order is refused everywhere (all or nothing, so it never applies to half the pools) and reported with
`Conflict`. The result is a `Store`, which `apply` uses on each read of a pool's instance types (core:
pkg/cloudprovider/overlay/cloudprovider.go).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy import requirements
from karpy.api import labels, nodeclaim, nodeoverlay, nodepool
from karpy.cloudprovider import errors, types, wrapping

OfferingKey = tuple[str, str, str]
"""(zone, capacity type, reservation id): what tells one offering of a type from another."""


def offering_key(offering: types.Offering) -> OfferingKey:
    return (offering.zone, offering.capacity_type, offering.reservation_id)


@dataclass(frozen=True, slots=True)
class TypeUpdate:
    """What the overlays change of one instance type in one pool."""

    prices: Mapping[OfferingKey, str] = field(default_factory=dict)
    """The winning `price` or `priceAdjustment` of each overlaid offering."""
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Extended resources added to the capacity, milli-units."""


@dataclass(frozen=True, slots=True)
class Store:
    """The overlays' effect on every evaluated NodePool (read-only once built)."""

    evaluated: frozenset[str] = frozenset()
    """Pools whose instance types the overlays were evaluated against."""
    updates: Mapping[str, Mapping[str, TypeUpdate]] = field(default_factory=dict)
    """Pool name → instance type name → its update."""

    def apply(self, pool: str, instance_types: Sequence[types.InstanceType]) -> Sequence[types.InstanceType]:
        """The pool's types with the overlays applied; the same sequence when none applies to the pool.
        `errors.UnevaluatedNodePool` when the pool has not been evaluated yet."""
        if pool not in self.evaluated:
            raise errors.UnevaluatedNodePool(f"NodePool {pool!r} is awaiting NodeOverlay evaluation")
        updates = self.updates.get(pool)
        if not updates:
            return instance_types
        return [_applied(it, updates[it.name]) if it.name in updates else it for it in instance_types]


def _applied(it: types.InstanceType, update: TypeUpdate) -> types.InstanceType:
    offerings = tuple(
        dataclasses.replace(o, price=nodeoverlay.adjusted_price(o.price, update.prices[key]), price_overlaid=True)
        if (key := offering_key(o)) in update.prices
        else o
        for o in it.offerings
    )
    if not update.capacity:
        return dataclasses.replace(it, offerings=offerings)
    return dataclasses.replace(
        it, offerings=offerings, capacity={**it.capacity, **update.capacity}, capacity_overlaid=True
    )


@dataclass(frozen=True, slots=True)
class Evaluation:
    store: Store
    conflicting: frozenset[str]
    """Overlays refused for a conflict with an overlay of the same weight."""


@dataclass(slots=True)
class _Price:
    change: str
    lowest_weight: int
    """The weight of the last (lightest) overlay that selected the offering: only an overlay of this same weight
    can conflict with what is set, as overlays arrive heaviest first."""


@dataclass(slots=True)
class _Capacity:
    merged: dict[str, int]
    lowest_resources: frozenset[str]
    lowest_weight: int


@dataclass(slots=True)
class _Type:
    prices: dict[OfferingKey, _Price] = field(default_factory=dict)
    capacity: _Capacity | None = None


def evaluate(
    overlays: Sequence[nodeoverlay.NodeOverlay],
    pools: Sequence[nodepool.NodePool],
    instance_types: Mapping[str, Sequence[types.InstanceType]],
) -> Evaluation:
    """The store for `pools` (those in `instance_types`; the others stay unevaluated) and the overlays in
    conflict. `overlays` are the valid ones (an invalid overlay applies nowhere)."""
    evaluated = [p for p in pools if p.name in instance_types]
    work: dict[str, dict[str, _Type]] = {p.name: {} for p in evaluated}
    conflicting: set[str] = set()
    for overlay in nodeoverlay.by_weight(overlays):
        wanted = requirements.Requirements.from_node_selector(overlay.spec.requirements)
        selected = [
            (pool.name, it, offerings)
            for pool in evaluated
            for it in instance_types[pool.name]
            if (offerings := _selected_offerings(pool, it, wanted))
        ]
        if any(_conflicts(work[pool].get(it.name), overlay, offerings) for pool, it, offerings in selected):
            conflicting.add(overlay.name)
            continue
        for pool, it, offerings in selected:
            _record(work[pool].setdefault(it.name, _Type()), overlay, offerings)
    store = Store(
        evaluated=frozenset(work),
        updates={
            pool: {
                name: TypeUpdate(
                    prices={key: price.change for key, price in update.prices.items()},
                    capacity=dict(update.capacity.merged) if update.capacity else {},
                )
                for name, update in by_type.items()
            }
            for pool, by_type in work.items()
            if by_type
        },
    )
    return Evaluation(store=store, conflicting=frozenset(conflicting))


def _selected_offerings(
    pool: nodepool.NodePool, it: types.InstanceType, wanted: requirements.Requirements
) -> tuple[types.Offering, ...]:
    """The type's offerings the overlay selects; none when it does not select the type (core: getOverlaidOfferings).
    A type's own requirements are its labels, each offering key with every value its offerings carry, the pool's
    name and template labels; an overlay key none of them defines does not match (custom labels must be known)."""
    offering_values: dict[str, set[str]] = {}
    for offering in it.offerings:
        for key, value in offering.labels().items():
            offering_values.setdefault(key, set()).add(value)
    own = requirements.Requirements.from_labels(
        {**it.labels, **pool.template.labels, labels.LABEL_NODEPOOL: pool.name}
    ).add(*(requirements.Requirement.in_(key, values) for key, values in offering_values.items()))
    if own.compatible(wanted) is not None:
        return ()
    # An offering is selected when the overlay allows its zone, capacity type and reservation, or says nothing of
    # them (core: Offerings.Compatible, undefined well-known labels allowed).
    return tuple(
        o
        for o in it.offerings
        if wanted.compatible(
            requirements.Requirements.from_labels(o.labels()), allow_undefined=requirements.ALLOW_UNDEFINED_WELL_KNOWN
        )
        is None
    )


def _conflicts(update: _Type | None, overlay: nodeoverlay.NodeOverlay, offerings: Sequence[types.Offering]) -> bool:
    if update is None:
        return False
    weight = overlay.spec.weight
    if overlay.spec.price_change is not None:
        for offering in offerings:
            price = update.prices.get(offering_key(offering))
            if price is not None and price.lowest_weight == weight:
                return True
    capacity = update.capacity
    if overlay.spec.capacity and capacity is not None and capacity.lowest_weight == weight:
        return bool(capacity.lowest_resources & set(overlay.spec.capacity))
    return False


def _record(update: _Type, overlay: nodeoverlay.NodeOverlay, offerings: Sequence[types.Offering]) -> None:
    weight = overlay.spec.weight
    change = overlay.spec.price_change
    if change is not None:
        for offering in offerings:
            key = offering_key(offering)
            price = update.prices.get(key)
            if price is None:
                update.prices[key] = _Price(change=change, lowest_weight=weight)
            else:
                price.lowest_weight = weight  # a heavier overlay set it; this one only lowers the weight seen
    if overlay.spec.capacity:
        resources = frozenset(overlay.spec.capacity)
        if update.capacity is None:
            update.capacity = _Capacity(dict(overlay.spec.capacity), resources, weight)
        else:
            for resource, amount in overlay.spec.capacity.items():
                update.capacity.merged.setdefault(resource, amount)
            update.capacity.lowest_resources = resources
            update.capacity.lowest_weight = weight


class Overlays:
    """The current `Store`, replaced whole by the NodeOverlay controller after each evaluation and read by every
    listing and launch (upstream swaps its InstanceTypeStore the same way). Until the first evaluation no pool is
    evaluated, so nothing is provisioned at prices the overlays may still change."""

    def __init__(self) -> None:
        self.store = Store()

    def apply(self, pool: str, instance_types: Sequence[types.InstanceType]) -> Sequence[types.InstanceType]:
        return self.store.apply(pool, instance_types)

    def for_launch(
        self, claim_labels: Mapping[str, str], instance_types: Sequence[types.InstanceType]
    ) -> Sequence[types.InstanceType]:
        """The types a launch of a claim with these labels chooses from: its NodePool's view; a claim of no pool
        (a standalone NodeClaim) sees the list prices, as upstream's."""
        pool = claim_labels.get(labels.LABEL_NODEPOOL)
        return instance_types if pool is None else self.apply(pool, instance_types)


class OverlaidProvider(wrapping.ReadThrough):
    """A `CloudProvider` whose `instance_types` carry the overlays (core: pkg/cloudprovider/overlay); launches and
    terminations go to `inner`, which applies the same overlays to its launches (`use_overlays`)."""

    def __init__(self, inner: types.CloudProvider, overlays: Overlays) -> None:
        super().__init__(inner)
        self.overlays = overlays

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        return self.overlays.apply(pool.name, await self.inner.instance_types(pool))

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        return await self.inner.create(claim, adopt=adopt)

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        await self.inner.delete(claim)
