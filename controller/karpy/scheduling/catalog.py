"""Per-NodePool instance-type catalog as numpy arrays, with cached requirement masks.

For one pool: the instance types compatible with the pool's requirements (upstream pre-filters once), a matrix
types × resources of allocatable and of DaemonSet overhead, and the available offerings as parallel arrays. A
requirement set's compatibility with every type is the AND of per-key masks, each computed once per distinct
`Requirement` and cached on the catalog (one solve's lifetime), so cost grows with distinct pod shapes.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import numpy as np
import numpy.typing as npt

from karpy import requirements
from karpy.api import labels, meta, nodepool
from karpy.cloudprovider import types
from karpy.scheduling import pods, results, taints

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BEYOND: Final = 2**61
"""Where the int64 columns stop counting, in milli-units (2.3e15 CPUs, 2 PiB): a request is held at most at
BEYOND and an amount on offer at most at BEYOND - 1, so a request that large fits nowhere, while two saturated
amounts still add up inside int64. Real capacities are far below it and stay exact; the Python ints the columns
come from stay exact at any magnitude (`karpy.api.quantity`)."""
_OFFERING_KEYS = (labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE, labels.LABEL_ZONE_ID)


@dataclass(frozen=True, slots=True)
class ResourceIndex:
    """Resource names in column order: cpu, memory, pods, then every other name seen, sorted."""

    names: tuple[str, ...]

    @staticmethod
    def build(maps: Sequence[Mapping[str, int]]) -> ResourceIndex:
        base = (labels.RESOURCE_CPU, labels.RESOURCE_MEMORY, labels.RESOURCE_PODS)
        extra = sorted({k for m in maps for k in m} - set(base))
        return ResourceIndex((*base, *extra))

    def vector(self, amounts: Mapping[str, int]) -> IntArray:
        """A request as a column vector, each entry held within ±BEYOND."""
        return np.array(_held([amounts.get(n, 0) for n in self.names], BEYOND), dtype=np.int64)

    def capacity_vector(self, amounts: Mapping[str, int]) -> IntArray:
        """An amount on offer (allocatable, capacity) as a column vector, each entry below BEYOND."""
        return np.array(_held([amounts.get(n, 0) for n in self.names], BEYOND - 1), dtype=np.int64)

    def to_map(self, vector: IntArray) -> dict[str, int]:
        return {n: int(v) for n, v in zip(self.names, vector, strict=True) if v}


def _held(values: list[int], top: int) -> list[int]:
    """`values` within [-BEYOND, top]; the list itself when they are (the common case: one C-level pass)."""
    if values and (max(values) > top or min(values) < -BEYOND):
        return [max(-BEYOND, min(top, v)) for v in values]
    return values


def pool_requirements(pool: nodepool.NodePool) -> requirements.Requirements:
    """The pool's requirements plus its template labels and the nodepool label itself."""
    reqs = requirements.Requirements.from_node_selector(pool.template.requirements)
    fixed = dict(pool.template.labels)
    fixed[labels.LABEL_NODEPOOL] = pool.name
    return reqs.intersect(requirements.Requirements.from_labels(fixed))


def static_plan(pool: nodepool.NodePool) -> results.PlannedNodeClaim:
    """One NodeClaim of a static pool: the pool's requirements and labels, no pods, no instance-type options (core:
    scheduling.NewNodeClaimTemplate, as static provisioning and static drift use it)."""
    return results.PlannedNodeClaim(
        nodepool=pool.name,
        requirements=pool_requirements(pool),
        instance_type_options=(),
        pods=(),
        requests={},
        cheapest=None,
        static=True,
    )


class PoolCatalog:
    """Everything the solver needs about one NodePool's instance types, vectorised."""

    def __init__(
        self,
        pool: nodepool.NodePool,
        instance_types: Sequence[types.InstanceType],
        *,
        index: ResourceIndex,
        daemons: Sequence[pods.Pod] = (),
    ) -> None:
        self.pool = pool
        self.name = pool.name
        self.weight = pool.weight or 0
        self.taints: tuple[meta.Taint, ...] = pool.template.taints
        self.requirements = pool_requirements(pool)
        self.index = index
        self._key_masks: dict[requirements.Requirement, BoolArray] = {}
        self._offer_cache: dict[tuple[requirements.Requirement | None, ...], tuple[BoolArray, FloatArray]] = {}
        self._offer_ok: dict[tuple[requirements.Requirement | None, ...], BoolArray] = {}
        self._domains: Mapping[str, frozenset[str]] | None = None
        self.label_keys = frozenset(k for it in instance_types for k in it.labels)
        # Keys the provider's types define are well-known for it (upstream providers register their instance-type
        # labels in WellKnownLabels): a pod may require one that the pool's own requirements leave undefined.
        self.allow_undefined = requirements.ALLOW_UNDEFINED_WELL_KNOWN | self.label_keys
        self._all_types = tuple(instance_types)
        self.types = self._all_types
        self._build_arrays()
        keep = self.mask(self.requirements) & self.offerings(self.requirements)[0]
        self.types = tuple(t for t, k in zip(self._all_types, keep, strict=True) if k)
        self._key_masks.clear()
        self._offer_cache.clear()
        self._offer_ok.clear()
        self._build_arrays()
        names = [t.name for t in self.types]
        # rank of each type's name, so (price, name) orderings can be done with numpy lexsort
        self.name_rank: IntArray = np.argsort(np.argsort(np.array(names, dtype=object))).astype(np.int64)
        self.daemon, self.daemon_ports = self._daemon_overhead(daemons)
        usable = self.alloc - self.daemon  # allocatable left for workload pods on an empty node
        # A type whose DaemonSet overhead alone exceeds its allocatable can hold no pod: its row is -1 in every
        # resource, so no request fits it (every pod asks for a `pods` slot), whatever resources the pod names.
        usable[(usable < 0).any(axis=1)] = -1
        self.usable = usable
        # Read-only from here: a catalog may serve many solves (`Catalogs`), none of which may change it.
        for array in (self.alloc, self.capacity, self.off_type, self.off_price, self.name_rank, self.daemon):
            array.flags.writeable = False
        self.usable.flags.writeable = False
        for _, on in self.daemon_ports:
            on.flags.writeable = False

    def _build_arrays(self) -> None:
        width = len(self.index.names)
        alloc = [self.index.capacity_vector(t.allocatable) for t in self.types]
        self.alloc: IntArray = np.array(alloc, dtype=np.int64).reshape(len(self.types), width)
        capacity = [self.index.capacity_vector(t.capacity) for t in self.types]
        self.capacity: IntArray = np.array(capacity, dtype=np.int64).reshape(len(self.types), width)
        offers = [(i, o) for i, t in enumerate(self.types) for o in t.offerings if o.available]
        self.off_type: IntArray = np.array([i for i, _ in offers], dtype=np.int64)
        self.off_price: FloatArray = np.array([o.price for _, o in offers], dtype=np.float64)
        self.off_labels: tuple[Mapping[str, str], ...] = tuple(o.labels() for _, o in offers)
        self.offers = tuple(o for _, o in offers)

    def _daemon_overhead(
        self, daemons: Sequence[pods.Pod]
    ) -> tuple[IntArray, tuple[tuple[pods.HostPort, BoolArray], ...]]:
        """(types × resources of the DaemonSet pods each type would run, each daemon host port with the types it is
        held on). A daemon counts on a type when it tolerates the pool's taints (PreferNoSchedule always: a daemon
        does not honour the preference) and one of its required node-affinity terms, with its nodeSelector, is
        compatible with the pool and intersects the type (scheduler.go isDaemonPodCompatible)."""
        total = np.zeros_like(self.alloc)
        ports: list[tuple[pods.HostPort, BoolArray]] = []
        for d in daemons:
            if taints.untolerated(self.taints, (*d.tolerations, taints.TOLERATE_PREFER_NO_SCHEDULE)) is not None:
                continue
            on = np.zeros(len(self.types), dtype=np.bool_)
            for term in range(max(1, len(d.required_node_terms))):
                reqs = d.node_requirements(term=term)
                if not self.requirements.compatible(reqs, allow_undefined=self.allow_undefined):
                    on |= self.mask(reqs)
            # Held at BEYOND: each term is at most BEYOND, so the sum before the minimum stays inside int64.
            total = np.minimum(total + np.outer(on, self.index.vector(d.requests)), BEYOND)
            ports += [(port, on) for port in d.host_ports if on.any()]
        return total, tuple(ports)

    def port_blocked(self, host_ports: Sequence[pods.HostPort]) -> BoolArray | None:
        """Types on which a DaemonSet holds one of `host_ports` (None when none does)."""
        blocked = None
        for held, on in self.daemon_ports:
            if any(held.conflicts(p) for p in host_ports):
                blocked = on if blocked is None else blocked | on
        return blocked

    def domains(self) -> Mapping[str, frozenset[str]]:
        """Topology domains the pool can really produce: labels of its (requirement-filtered) instance types,
        labels of available offerings compatible with every offering requirement of the pool (a zone reachable only
        through a spot offering is no domain of an on-demand pool), and the pool's own values for keys neither
        defines (custom labels). Worked out once (every solve asks, and a catalog may serve many)."""
        if self._domains is None:
            self._domains = MappingProxyType(self._find_domains())
        return self._domains

    def _find_domains(self) -> dict[str, frozenset[str]]:
        found: dict[str, set[str]] = collections.defaultdict(set)
        for lab in self.off_labels:
            if all((req := self.requirements.get(k)) is None or req.has(v) for k, v in lab.items()):
                for k, v in lab.items():
                    found[k].add(v)
        for t in self.types:
            for k, v in t.labels.items():
                found[k].add(v)
        provided = set(found) | {k for lab in self.off_labels for k in lab} | set(self.label_keys)
        for k, req in self.requirements.items():
            values = req.values()
            if values is not None and k not in provided:
                found[k] |= values
        return {k: frozenset(v) for k, v in found.items()}

    # --- masks ----------------------------------------------------------------------------------------------
    def _key_mask(self, req: requirements.Requirement) -> BoolArray:
        cached = self._key_masks.get(req)
        if cached is not None:
            return cached
        if req.key not in self.label_keys:
            # The types do not define this key: it is the pool's or the cloud's to decide (Intersects semantics).
            mask = np.ones(len(self.types), dtype=np.bool_)
        else:
            mask = np.array(
                [req.has(t.labels[req.key]) if req.key in t.labels else req.absent for t in self.types],
                dtype=np.bool_,
            )
        mask.flags.writeable = False
        self._key_masks[req] = mask
        return mask

    def mask(self, reqs: requirements.Requirements) -> BoolArray:
        """Types whose labels are compatible with `reqs` (offering keys are checked by `offerings`)."""
        out = np.ones(len(self.types), dtype=np.bool_)
        for key, req in reqs.items():
            if key not in _OFFERING_KEYS:
                out &= self._key_mask(req)
        return out

    @staticmethod
    def offer_key(reqs: requirements.Requirements) -> tuple[requirements.Requirement | None, ...]:
        return (*tuple(reqs.get(k) for k in _OFFERING_KEYS), reqs.get(labels.LABEL_CAPACITY_RESERVATION_ID))

    def _offers_ok(self, cache_key: tuple[requirements.Requirement | None, ...]) -> BoolArray:
        ok = self._offer_ok.get(cache_key)
        if ok is None:
            ok = np.ones(len(self.offers), dtype=np.bool_)
            for req in cache_key:
                if req is not None:
                    ok &= np.array([_offering_has(req, lab) for lab in self.off_labels], dtype=np.bool_)
            ok.flags.writeable = False
            self._offer_ok[cache_key] = ok
        return ok

    def offerings(self, reqs: requirements.Requirements) -> tuple[BoolArray, FloatArray]:
        """(types with an available offering compatible with reqs, cheapest such offering's price or inf)."""
        cache_key = self.offer_key(reqs)
        cached = self._offer_cache.get(cache_key)
        if cached is not None:
            return cached
        ok = self._offers_ok(cache_key)
        price = np.full(len(self.types), np.inf)
        if ok.any():
            np.minimum.at(price, self.off_type[ok], self.off_price[ok])
        result = (np.isfinite(price), price)
        result[0].flags.writeable = result[1].flags.writeable = False
        self._offer_cache[cache_key] = result
        return result

    def cheapest_offering(self, type_index: int, reqs: requirements.Requirements) -> types.Offering | None:
        """The first (in catalog order) of the cheapest available offerings of a type compatible with reqs."""
        ok = self._offers_ok(self.offer_key(reqs))
        ids = np.flatnonzero(ok & (self.off_type == type_index))
        if not len(ids):
            return None
        return self.offers[int(ids[np.argmin(self.off_price[ids])])]


class Catalogs:
    """The `PoolCatalog`s of one caller's solves, kept across them (a disruption pass simulates many times over the
    same pools). A catalog is a function of its pool, instance types, resource index and DaemonSets alone, and its
    memos (masks, offerings) hold for any solve: one is reused when all four are the same (the same objects; the
    index by its names), and made afresh otherwise."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, tuple[str, ...]], tuple[object, object, object, PoolCatalog]] = {}

    def get(
        self,
        pool: nodepool.NodePool,
        instance_types: Sequence[types.InstanceType],
        *,
        index: ResourceIndex,
        daemons: Sequence[pods.Pod],
    ) -> PoolCatalog:
        key = (pool.name, index.names)
        found = self._made.get(key)
        if found is not None and found[0] is pool and found[1] is instance_types and found[2] is daemons:
            return found[3]
        made = PoolCatalog(pool, instance_types, index=index, daemons=daemons)
        self._made[key] = (pool, instance_types, daemons, made)
        return made


def _offering_has(req: requirements.Requirement, offering_labels: Mapping[str, str]) -> bool:
    value = offering_labels.get(req.key)
    return req.absent if value is None else req.has(value)
