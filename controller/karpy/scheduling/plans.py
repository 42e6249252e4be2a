"""A planned claim's outcome: its options sorted by price, the cheapest offering, and its requests (pure).

Options are sorted by (cheapest available offering compatible with the claim's requirements, type name); requests
are the placed pods plus the smallest DaemonSet overhead across the options. Claims with equal options and
offering requirements share one computed `Offer` (and so one tuple of options), which keeps tens of thousands of
planned claims cheap in time and memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from karpy import requirements
from karpy.cloudprovider import types
from karpy.scheduling import catalog, nodes, results


@dataclass(frozen=True, slots=True)
class Offer:
    """The parts of a planned claim that depend only on its pool, options and offering requirements."""

    options: tuple[types.InstanceType, ...]
    cheapest: results.CheapestOffering | None
    daemon: catalog.IntArray


OfferCache = dict[tuple[str, bytes, tuple[requirements.Requirement | None, ...]], Offer]


def offer(slot: nodes.Slot, index: catalog.ResourceIndex, cache: OfferCache) -> Offer:
    """Options sorted by (cheapest compatible offering, name), that offering, and the smallest daemon overhead;
    shared between claims with equal inputs (clones of a hostname-spread run share one tuple of options)."""
    pool = slot.pool
    assert pool is not None
    assert slot.options is not None
    key = (pool.name, slot.options.tobytes(), catalog.PoolCatalog.offer_key(slot.requirements))
    found = cache.get(key)
    if found is not None:
        return found
    _, prices = pool.offerings(slot.requirements)
    candidates = np.flatnonzero(slot.options & np.isfinite(prices))
    ids = candidates[np.lexsort((pool.name_rank[candidates], prices[candidates]))].tolist()
    cheapest = None
    if ids:
        best = pool.cheapest_offering(int(ids[0]), slot.requirements)
        if best is not None:
            cheapest = results.CheapestOffering(pool.types[ids[0]].name, best.zone, best.capacity_type, best.price)
    daemon = pool.daemon[ids].min(axis=0) if ids else np.zeros(len(index.names), np.int64)
    found = cache[key] = Offer(tuple(pool.types[i] for i in ids), cheapest, daemon)
    return found


def plan(slot: nodes.Slot, index: catalog.ResourceIndex, cache: OfferCache) -> results.PlannedNodeClaim:
    assert slot.pool is not None
    found = offer(slot, index, cache)
    return results.PlannedNodeClaim(
        nodepool=slot.pool.name,
        requirements=slot.requirements,
        instance_type_options=found.options,
        pods=tuple(slot.placed),
        requests=index.to_map(slot.used + found.daemon),
        cheapest=found.cheapest,
        min_values_relaxed=slot.min_values_relaxed,
        hostname=slot.name,
    )
