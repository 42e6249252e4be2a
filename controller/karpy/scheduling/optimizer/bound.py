"""A lower bound on the hourly cost of the new capacity a solve planned, and the per-resource LP behind it.

`lower_bound` solves the pattern LP of `patterns` over the classes and columns below: small columns (nodes holding
a handful of pods) count whole pods per node, which the per-resource LP here cannot (on the real AWS catalog its
optimum is ~6% under any integral plan); large columns keep the per-resource form. Classes beyond `MERGED_CLASSES`
are merged first (`relaxation`: by compatible columns, then rounded down), which keeps the optimum a lower bound.
`solve_lp` remains the per-resource LP the repack uses to steer its greedy fill, and the bound's fallback when no
merge gets that far.

Per-resource formulation (LP relaxation; HiGHS through `lp`, imported at the first solve):

* A *class* c is a set of n_c pods with the same request vector r_c (cpu, memory, pods, extended resources) on
  claims with the same requirements (hostname excluded). Splitting classes by request vector is what makes the
  relaxation valid: any integral plan puts some fraction of each class on each node, and that fraction carries
  exactly that share of the class's demand in every resource.
* A *column* k is a node configuration: one instance type t of one pool bought through one available offering o
  (offerings whose compatibility with every class is the same collapse into one column at their cheapest price).
  Its capacity is the type's allocatable minus the pool's DaemonSet overhead for that type — exactly what the solver
  lets workload pods use, so the bound and the plan's cost count daemon overhead the same way.
* Class c may use column k when k's type satisfies the claim requirements' labels, k's offering satisfies its
  zone / capacity-type / reservation requirements, and one pod of the class fits an empty node of the type.

Variables: x_k ≥ 0 fractional nodes of column k; y_{c,k} ≥ 0 the share of class c placed on k.
Minimise Σ_k price_k·x_k subject to Σ_k y_{c,k} = 1 for every class and, for every column k and resource r,
Σ_c y_{c,k}·n_c·r_{c,r} ≤ capacity_{k,r}·x_k. Any feasible plan is a feasible point (a node of type t bought at
offering o costs at least column k's price), so the optimum bounds its cost from below. Topology and the
indivisibility of nodes are ignored here.

What hostname rules force is bounded apart (`exclusion`); the bound reported is the larger of the two. On small
solves (`APART_PODS`) the pods pinned to zones are bounded once more without the others, split into the parts no
node is shared across (`_apart`): that sum bounds every plan too, and counts the whole node each zone's pods need.

Columns that another compatible column beats on every resource per dollar are dropped before solving: they never
improve the optimum and the real catalog has ~1,300 types of which only a few dozen are undominated.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import catalog
from karpy.scheduling.optimizer import exclusion, lp, patterns, relaxation

if TYPE_CHECKING:
    from karpy.scheduling import nodes

_OFFERING_KEYS = (
    labels.LABEL_ZONE,
    labels.LABEL_CAPACITY_TYPE,
    labels.LABEL_ZONE_ID,
    labels.LABEL_CAPACITY_RESERVATION_ID,
)
_RELATIVE_TOLERANCE = 1e-9
# Beyond this many classes (topology splits claims into many requirement sets) the pattern LP's rounds cost seconds.
PATTERN_CLASSES = 64
# The bound merges its classes down to this many before the pattern LP (`relaxation.merge`). Measured on the diverse
# mix, AWS catalog, 20,000 pods: ~200 classes merge into 30, whose pattern LP (~0.1 CPU s) bounds 2% above the
# per-resource LP over all of them, where the unmerged pattern LP, stopped after its rounds, bounds 9% below.
MERGED_CLASSES = PATTERN_CLASSES
# Up to this many pods the zone parts are bounded apart (one pattern LP each). Measured on the diverse mix, AWS
# catalog: at 100 pods it lifts the bound by 13% (each zone's few pods buy whole nodes); from 1,000 pods up their
# sum stays under the whole's bound (the unpinned pods it drops weigh more) and the LPs cost ~0.4 CPU s at 20,000.
APART_PODS = 500


@dataclass(frozen=True, slots=True)
class Solution:
    """An LP optimum: `nodes[k]` fractional nodes of column k, `share[c, k]` of class c's pods on column k."""

    cost: float
    nodes: catalog.FloatArray
    share: catalog.FloatArray


undominated = patterns.undominated  # per-dollar dominance of columns; lives with the pattern LP


def solve_lp(
    demand: catalog.FloatArray, compat: catalog.BoolArray, capacity: catalog.FloatArray, price: catalog.FloatArray
) -> Solution | None:
    """Solve the covering LP above. `demand` is classes × resources (the whole class, n_c·r_c), `compat` classes ×
    columns, `capacity` columns × resources, `price` per column. None when some class has no usable column."""
    n_cls = demand.shape[0]
    n_col = len(price)
    if n_cls == 0:
        return Solution(0.0, np.zeros(n_col), np.zeros((0, n_col)))
    if not compat.any(axis=1).all():
        return None
    used = np.flatnonzero(demand.sum(axis=0) > 0)
    scale = np.maximum(capacity[:, used].max(axis=0, initial=0.0), demand[:, used].max(axis=0, initial=0.0))
    scale = np.where(scale > 0, scale, 1.0)
    cap = capacity[:, used] / scale
    dem = demand[:, used] / scale
    keep = undominated(compat, cap, price)
    cols = np.flatnonzero(keep)
    sub = compat[:, cols]
    n_k, n_u = len(cols), len(used)
    pair_c, pair_k = np.nonzero(sub)
    n_y = len(pair_c)
    # Capacity rows (k, r): Σ_c y_{c,k}·dem_{c,r} − cap_{k,r}·x_k ≤ 0.
    x_rows = (np.arange(n_k)[:, None] * n_u + np.arange(n_u)[None, :]).ravel()
    x_cols = np.repeat(np.arange(n_k), n_u)
    x_vals = -cap[cols].ravel()
    y_rows = (pair_k[:, None] * n_u + np.arange(n_u)[None, :]).ravel()
    y_cols = np.repeat(n_k + np.arange(n_y), n_u)
    y_vals = dem[pair_c].ravel()
    a_ub = lp.Triplets(
        np.concatenate([x_rows, y_rows]),
        np.concatenate([x_cols, y_cols]),
        np.concatenate([x_vals, y_vals]),
        (n_k * n_u, n_k + n_y),
    )
    a_eq = lp.Triplets(pair_c, n_k + np.arange(n_y), np.ones(n_y), (n_cls, n_k + n_y))
    res = lp.minimize(
        np.concatenate([price[cols], np.zeros(n_y)]),
        (a_ub, np.zeros(n_k * n_u)),
        (a_eq, np.ones(n_cls)),
    )
    if res is None:
        return None
    nodes_out = np.zeros(n_col)
    nodes_out[cols] = res.x[:n_k]
    share = np.zeros((n_cls, n_col))
    share[pair_c, cols[pair_k]] = res.x[n_k:]
    return Solution(res.cost, nodes_out, share)


@dataclass(frozen=True, slots=True)
class Bounds:
    lp: float
    """The LP relaxation over the pods' requests alone."""
    tightened: float
    """The larger of `lp` and what the exclusion groups force (`exclusion.bound`): the bound reported."""


def lower_bound(claims: Sequence[nodes.Slot], index: catalog.ResourceIndex) -> Bounds:
    """Lower bounds on the cost of the new capacity for the pods placed on `claims` (0.0 when there is nothing to
    bound): the LP optimum, and that tightened by the largest exclusion groups (`exclusion.GROUPS` of them, most
    nodes forced first)."""
    counts: dict[_ClassKey, int] = collections.defaultdict(int)
    pools: dict[str, catalog.PoolCatalog] = {}
    # id(requests) -> vector: pods stamped from one template share their requests (`pods.Interner`), and the pods
    # outlive this call, so no id is reused meanwhile
    vectors: dict[int, tuple[int, ...]] = {}
    exclusions = exclusion.Exclusions()
    per_group: dict[tuple[str, requirements.Requirements], dict[tuple[tuple[int, ...], tuple[int, ...]], int]] = {}
    for slot in claims:
        assert slot.pool is not None
        pools[slot.pool.name] = slot.pool
        group = (slot.pool.name, slot.requirements.without(labels.LABEL_HOSTNAME))
        on_group = per_group.get(group)
        if on_group is None:
            on_group = per_group[group] = collections.defaultdict(int)
        for pod in slot.placed:
            vec = vectors.get(id(pod.requests))
            if vec is None:
                vec = vectors[id(pod.requests)] = tuple(int(v) for v in index.vector(pod.requests))
            on_group[(vec, exclusions.of(pod))] += 1
    members: dict[int, dict[_ClassKey, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    for (pool_name, reqs), on_group in per_group.items():
        for (vec, taken), n in on_group.items():
            cls = _ClassKey(pool_name, reqs, vec)
            counts[cls] += n
            for col in taken:
                members[col][cls] += n
    if not counts:
        return Bounds(0.0, 0.0)
    classes = list(counts)
    blocks = [_pool_columns(pool, classes) for pool in pools.values()]
    compat = np.concatenate([b[0] for b in blocks], axis=1)
    capacity = np.concatenate([b[1] for b in blocks], axis=0)
    price = np.concatenate([b[2] for b in blocks])
    loose = np.concatenate([b[3] for b in blocks], axis=1)
    vectors_of = np.array([c.vector for c in classes], dtype=np.int64).reshape(len(classes), -1)
    sizes = np.array([counts[c] for c in classes], dtype=np.int64)
    position = {c: i for i, c in enumerate(classes)}
    groups = [{position[c]: n for c, n in members[col].items()} for col in range(len(exclusions.caps))]
    caps = exclusions.caps
    everything = np.arange(len(classes))
    lp, tightened = _part_bound(
        _sub(everything, vectors_of, sizes=sizes, compat=compat, loose=loose),
        capacity,
        price=price,
        groups=groups,
        caps=caps,
        part=everything,
    )
    # Pods pinned to zones: dropping the others only lowers any plan's cost, and what is left splits into parts
    # that share no node, each bounded by its own pattern LP and needing at least one node (`_part_bound`).
    pinned = np.array([c.requirements.get(labels.LABEL_ZONE) is not None for c in classes], dtype=np.bool_)
    parts = _apart(compat, np.flatnonzero(pinned)) if int(sizes.sum()) <= APART_PODS else []
    if len(parts) > 1:
        apart = 0.0
        for part in parts:
            cols = np.flatnonzero(compat[part].any(axis=0))
            one = _sub(part, vectors_of, sizes=sizes, compat=compat[:, cols], loose=loose[:, cols])
            apart += _part_bound(one, capacity[cols], price=price[cols], groups=groups, caps=caps, part=part)[1]
        tightened = max(tightened, apart)
    return Bounds(lp, tightened)


def _sub(
    part: catalog.IntArray,
    vectors: catalog.IntArray,
    *,
    sizes: catalog.IntArray,
    compat: catalog.BoolArray,
    loose: catalog.BoolArray,
) -> _Part:
    return _Part(vectors[part], sizes[part], compat[part], loose[part])


def _apart(compat: catalog.BoolArray, among: catalog.IntArray) -> list[catalog.IntArray]:
    """The classes `among` split into parts no node is shared across: two classes are in one part when some column is
    compatible with both (a node is one column, and holds only pods whose class that column suits), so a plan's
    nodes split by part and its cost is the sum of what each part's nodes cost. Zone requirements are what splits
    them: claims pinned to disjoint zones never share an offering."""
    pair_c, pair_k = np.nonzero(compat[among])
    label = components(pair_c, pair_k, n_cls=len(among), n_col=compat.shape[1])
    return [among[label == v] for v in np.unique(label)]


def components(pair_c: catalog.IntArray, pair_k: catalog.IntArray, *, n_cls: int, n_col: int) -> catalog.IntArray:
    """Per class, the smallest class index of its connected component in the bipartite graph of classes and columns
    whose edges are the pairs (pair_c[i], pair_k[i]). Each round carries the smallest label one hop across a column
    and back; it stops when no label moves, after at most as many rounds as the longest path has class hops."""
    label = np.arange(n_cls)
    while True:
        by_col = np.full(n_col, n_cls)
        np.minimum.at(by_col, pair_k, label[pair_c])
        moved = label.copy()
        np.minimum.at(moved, pair_c, by_col[pair_k])
        if np.array_equal(moved, label):
            return label
        label = moved


@dataclass(frozen=True, slots=True)
class _Part:
    vectors: catalog.IntArray  # classes × resources, one pod
    sizes: catalog.IntArray  # pods per class
    compat: catalog.BoolArray  # classes × the part's columns
    loose: catalog.BoolArray  # the same by requirements alone


def _part_bound(
    one: _Part,
    capacity: catalog.FloatArray,
    *,
    price: catalog.FloatArray,
    groups: list[dict[int, int]],
    caps: list[int],
    part: catalog.IntArray,
) -> tuple[float, float]:
    """(LP bound, tightened bound) of one part over its own columns. The tightened one is at least one node: a
    part with pods buys a node of a column some class of it may use, at least the cheapest such."""
    if not one.compat.any(axis=1).all():
        return 0.0, 0.0  # some class fits no column: nothing to bound it by
    best = _requests_bound(one, capacity, price)
    tightened = max(best, float(price.min()) * (1 - _RELATIVE_TOLERANCE))
    local = {int(c): i for i, c in enumerate(part)}
    hosted_by = [[(local[c], n) for c, n in g.items() if c in local] for g in groups]
    forced = sorted(
        (col for col, hosted in enumerate(hosted_by) if hosted),
        key=lambda col: -sum(n for _, n in hosted_by[col]) / caps[col],
    )
    if not forced:
        return best, tightened
    demand = (one.vectors * one.sizes[:, None]).sum(axis=0).astype(np.float64)
    used = np.flatnonzero(demand > 0)
    fronts = exclusion.Fronts(loose=one.loose, capacity=capacity[:, used] / demand[used][None, :], price=price)
    for col in forced[: exclusion.GROUPS]:
        tightened = max(tightened, exclusion.bound(hosted_by[col], caps[col], compat=one.compat, fronts=fronts))
    return best, tightened


def _requests_bound(one: _Part, capacity: catalog.FloatArray, price: catalog.FloatArray) -> float:
    """The pattern LP's bound over the part's classes, merged to at most `MERGED_CLASSES` (`relaxation.merge`:
    exactly while it can, then relaxing which columns and how large), or the per-resource LP when no merge gets
    there."""
    merged = relaxation.merge(one.vectors, one.sizes, one.compat, limit=MERGED_CLASSES)
    if merged is None:
        weak = solve_lp((one.vectors * one.sizes[:, None]).astype(np.float64), one.compat, capacity, price)
        return weak.cost if weak is not None else 0.0
    cols = relaxation.distinct_columns(merged.compat, capacity, price)
    solution = patterns.solve(
        merged.vectors, merged.sizes, merged.compat[:, cols], capacity[cols].astype(np.int64), price[cols]
    )
    return solution.bound if solution is not None else 0.0


def _codes(values: list[str | None]) -> tuple[list[str | None], catalog.IntArray]:
    """(distinct values, index of each value among them)."""
    distinct: dict[str | None, int] = {}
    codes = np.array([distinct.setdefault(v, len(distinct)) for v in values], dtype=np.int64)
    return list(distinct), codes


@dataclass(frozen=True, slots=True)
class _ClassKey:
    pool: str
    requirements: requirements.Requirements  # the claim's, hostname excluded
    vector: tuple[int, ...]  # one pod's requests in index order


def _pool_columns(
    pool: catalog.PoolCatalog, classes: list[_ClassKey]
) -> tuple[catalog.BoolArray, catalog.FloatArray, catalog.FloatArray, catalog.BoolArray]:
    """One pool's columns: (classes × columns compatibility, columns × resources capacity, column prices, the
    compatibility by requirements alone: whether one pod of the class fits aside)."""
    n_off = len(pool.offers)
    offer_ok = np.zeros((len(classes), n_off), dtype=np.bool_)
    type_ok = np.zeros((len(classes), len(pool.types)), dtype=np.bool_)
    labels_ok = np.zeros((len(classes), len(pool.types)), dtype=np.bool_)
    usable = np.maximum(pool.usable, 0)
    by_requirement: dict[requirements.Requirement, catalog.BoolArray] = {}  # many classes share requirements
    coded: dict[str, tuple[list[str | None], catalog.IntArray]] = {}  # key -> (distinct values, code per offering)
    fitting: dict[tuple[int, ...], catalog.BoolArray] = {}  # request vector -> types one such pod fits
    for ci, cls in enumerate(classes):
        if cls.pool != pool.name:
            continue
        ok = np.ones(n_off, dtype=np.bool_)
        for key in _OFFERING_KEYS:  # which offerings the class may buy: zone, capacity type, reservation
            req = cls.requirements.get(key)
            if req is not None:
                allowed = by_requirement.get(req)
                if allowed is None:
                    if key not in coded:
                        coded[key] = _codes([lab.get(key) for lab in pool.off_labels])
                    values, codes = coded[key]
                    verdict = np.array([req.absent if v is None else req.has(v) for v in values], dtype=np.bool_)
                    allowed = by_requirement[req] = verdict[codes]
                ok &= allowed
        offer_ok[ci] = ok
        fits = fitting.get(cls.vector)
        if fits is None:  # classes differ by requirements far more often than by request shape
            fits = fitting[cls.vector] = (usable >= np.array(cls.vector, dtype=np.int64)[None, :]).all(axis=1)
        labels_ok[ci] = pool.mask(cls.requirements)
        type_ok[ci] = labels_ok[ci] & fits
    # Offerings of one type that the same classes may buy collapse into one column at the cheapest price (the
    # first such offering on a tie): group by (type, classes allowed) as one opaque byte string per offering.
    if n_off:
        packed = np.packbits(offer_ok, axis=0).T
        keys = np.ascontiguousarray(np.concatenate([pool.off_type[:, None].view(np.uint8), packed], axis=1))
        _, group = np.unique(keys.view(np.dtype((np.void, keys.shape[1]))).ravel(), return_inverse=True)
        group = group.ravel()
        ranked = np.lexsort((np.arange(n_off), pool.off_price, group))  # by group, cheapest then first
        leads = np.ones(n_off, dtype=np.bool_)
        leads[1:] = group[ranked][1:] != group[ranked][:-1]
        chosen = np.sort(ranked[leads])
    else:
        chosen = np.zeros(0, dtype=np.int64)
    types = pool.off_type[chosen] if len(chosen) else np.zeros(0, np.int64)
    compat = offer_ok[:, chosen] & type_ok[:, types]
    loose = offer_ok[:, chosen] & labels_ok[:, types]
    return compat, usable[types].astype(np.float64).reshape(len(chosen), -1), pool.off_price[chosen], loose
