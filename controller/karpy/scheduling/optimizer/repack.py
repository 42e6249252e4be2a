"""Cost post-pass: re-pack groups of interchangeable new claims so their total $/h approaches the LP bound.

First-fit-decreasing fills claims in CPU-then-memory order, so early claims are CPU-bound and late ones memory-bound,
and each is then sized to its binding dimension. This pass groups a pool's claims by requirements (hostname aside:
zone, capacity type and every other key stay as they were; claims relaxed for minValues are left alone). A pod is
*tied* to its claim when moving it could break a hostname rule (`tying`: host ports, hostname-keyed terms it
owns, or selected by a hostname-keyed affinity group); every other pod may move within its group, which changes no
topology count (every other key's domains are identical there). A claim without tied pods is dissolved; one with
tied pods is a *fixed bin* (kept, with its hostname, unless its pool has limits or its requirements minValues): its
other pods leave, and movable pods fill the room its tied pods leave on its cheapest option (`fixedbins.fill`).
Bins that took nothing and hold only pods that per-node caps alone tie (hostname anti-affinity, hostname spread:
`tying.Traits.capped`) are then dissolved and their pods packed afresh, several groups per node within the caps
(`capped`), when that is cheaper.

For each group, the movable pods no bin took (counted per request vector: the work scales with shapes, not pods):
1. solve the pattern LP of `patterns` over the group's compatible instance types (allocatable minus daemon
   overhead): small types are bought as whole patterns (pods per shape on one node), large ones per resource
   (a group with more than `bound.PATTERN_CLASSES` shapes, where its rounds would cost seconds, instead fills
   whole nodes of each type the per-resource LP buys with the pods it gave that type, then goes to step 3's end);
2. take every pattern's whole copies, and fill whole nodes of each large type with the pods the LP gave it;
3. solve again for what is left (seeded with the patterns found), a few times (`packing`); then round the last
   solution's fractional patterns up (each trimmed to the pods still unplaced); anything still left (from large
   types' fractions) goes to the cheapest type that takes all of it, or an LP-guided greedy fill; in a group of at
   most `packing.REPLAN_PODS` pods, that rounded part is planned again with whole patterns only (every type bought
   as whole patterns, iterated rounding) when it is well above its LP bound, and kept if cheaper;
4. each claim's options are the compatible types that fit it (its cost is the cheapest one).
The result replaces the pool's groups (with fixed bins; else each group on its own) only if it is cheaper, keeps
minValues for every claim and uses no more of any NodePool limit (summed over claims, each charged its largest
option as the solver charges) than the original.
Deterministic: pods are handed out per shape in (namespace, name) order, so the bulk and pod-by-pod paths give
the same plan.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.cloudprovider import types
from karpy.scheduling import catalog, nodes, pods, topology
from karpy.scheduling.optimizer import capped, fixedbins, packing, tying

_POD_ORDER = operator.attrgetter("namespace", "name")  # the hand-out order of a shape's pods (any fixed one)
_MIN_SAVING = 1e-9  # relative: a repack must be cheaper than this to replace the original claims


@dataclass(slots=True)
class _Group:
    pool: catalog.PoolCatalog
    requirements: requirements.Requirements  # hostname excluded
    claims: list[nodes.Slot]  # every pod may move
    fixed: list[nodes.Slot] = field(default_factory=list)  # fixed bins: some pods are tied, others may leave


@dataclass(slots=True)
class _Repacked:
    fixed: dict[int, nodes.Slot | None]  # id(original fixed claim) -> the bin as repacked (None: emptied)
    new: list[nodes.Slot]


def repack(
    claims: Sequence[nodes.Slot], *, topo: topology.Topology, names: Iterator[int] | None = None
) -> list[nodes.Slot]:
    """`claims` (in order) with re-packable groups replaced by a cheaper packing when one is found. A pool with fixed
    bins is re-packed as a whole (bins may take pods of its other groups); otherwise group by group. Fixed bins stay
    where they were; a group's new claims take the place of its first freely movable claim (or follow its first
    fixed bin when it has none)."""
    ties = tying.Ties(topo)
    groups: dict[tuple[str, requirements.Requirements], _Group] = {}
    member: dict[int, tuple[str, requirements.Requirements]] = {}
    for i, slot in enumerate(claims):
        if slot.pool is None or slot.min_values_relaxed or not slot.placed:
            continue
        key = (slot.pool.name, slot.requirements.without(labels.LABEL_HOSTNAME))
        tied = any(ties.tied(p) for p in slot.placed)
        if not tied:
            groups.setdefault(key, _Group(slot.pool, key[1], [])).claims.append(slot)
        elif not slot.pool.pool.limits and not slot.requirements.has_min_values():
            groups.setdefault(key, _Group(slot.pool, key[1], [])).fixed.append(slot)
        else:
            continue  # limits or minValues would need each bin re-checked: left as it is
        member[i] = key
    replaced: dict[tuple[str, requirements.Requirements], _Repacked] = {}
    names = itertools.count(len(claims)) if names is None else names  # numbers for the claims it opens
    by_pool: dict[str, list[tuple[str, requirements.Requirements]]] = collections.defaultdict(list)
    for key in groups:
        by_pool[key[0]].append(key)
    for keys in by_pool.values():
        pool_groups = [groups[k] for k in keys]
        whole = _repack_pool(pool_groups, ties, names=names) if any(g.fixed for g in pool_groups) else None
        if whole is not None:
            replaced.update(zip(keys, whole, strict=True))
            continue
        for key, group in zip(keys, pool_groups, strict=True):
            if group.claims:
                better = _repack_pool([_Group(group.pool, group.requirements, group.claims)], ties, names=names)
                if better is not None:
                    replaced[key] = better[0]
    out: list[nodes.Slot] = []
    for i, slot in enumerate(claims):
        own = member.get(i)
        if own is None or own not in replaced:
            out.append(slot)
            continue
        group, done = groups[own], replaced[own]
        if id(slot) in done.fixed:
            kept = done.fixed[id(slot)]
            if kept is not None:
                out.append(kept)
        elif any(slot is f for f in group.fixed):
            out.append(slot)  # a fixed bin left as it was (its group was re-packed on its own)
        if slot is (group.claims[0] if group.claims else group.fixed[0]):
            out.extend(done.new)
    return out


def _repack_pool(groups: list[_Group], ties: tying.Ties, *, names: Iterator[int]) -> list[_Repacked] | None:
    """Re-pack `groups` (one pool's requirement groups) together: fixed bins keep their tied pods and fill their
    room (`fixedbins.fill`), each group's other movable pods are packed afresh (`packing`). None unless that is
    cheaper than the claims it replaces."""
    pool = groups[0].pool
    prices = [_Prices(pool, g.requirements) for g in groups]
    bases = [pool.mask(g.requirements) & pool.offerings(g.requirements)[0] for g in groups]
    original_cost = sum(prices[i](c) for i, g in enumerate(groups) for c in (*g.claims, *g.fixed))
    found: list[fixedbins.Bin] = []
    movable_by_group: list[list[pods.Pod]] = []
    for i, g in enumerate(groups):
        made = fixedbins.bins(g.fixed, ties, pool=pool, base=bases[i], prices=prices[i].prices, group=i, names=names)
        if made is None:
            return None
        found += made[0]
        movable_by_group.append(sorted([*(p for c in g.claims for p in c.placed), *made[1]], key=_POD_ORDER))
    rest = fixedbins.fill(
        found,
        movable_by_group,
        ties,
        index=pool.index,
        narrows=fixedbins.narrowing([g.requirements for g in groups]),
        prices=[p.prices for p in prices],
    )
    new: list[list[nodes.Slot]] = []
    for i, g in enumerate(groups):
        packed = _pack(g, sorted(rest[i], key=_POD_ORDER), names=names) if rest[i] else []
        if packed is None:
            return None
        new.append(packed)
    found, gone = _repack_capped(found, groups, ties, prices=prices, bases=bases, new=new, names=names)
    if pool.pool.limits and not all(_fit_limits(g, n) for g, n in zip(groups, new, strict=True)):
        return None
    bins = _bin_slots(found, pool=pool, groups=groups, bases=bases)
    new_cost = sum(prices[b.group](slot) for b, slot in bins if slot.placed) + sum(
        prices[i](s) for i, slots in enumerate(new) for s in slots
    )
    if new_cost >= original_cost * (1 - _MIN_SAVING):
        return None
    out = [_Repacked({}, slots) for slots in new]
    originals = {id(c) for g in groups for c in g.fixed}
    for b in gone:
        if id(b.claim) in originals:
            out[b.home].fixed[id(b.claim)] = None
    for b, slot in bins:
        if id(b.claim) not in originals:  # a part split off a bin (`fixedbins.bins`): a claim of its own
            out[b.home].new.append(slot)
        else:
            out[b.home].fixed[id(b.claim)] = slot if slot.placed else None  # a bin all of whose pods left: gone
    return out


def _repack_capped(
    found: list[fixedbins.Bin],
    groups: list[_Group],
    ties: tying.Ties,
    *,
    prices: list[_Prices],
    bases: list[catalog.BoolArray],
    new: list[list[nodes.Slot]],
    names: Iterator[int],
) -> tuple[list[fixedbins.Bin], list[fixedbins.Bin]]:
    """Per group, the bins that took nothing and hold only pods that caps alone tie (`capped`) are dissolved and
    their pods re-packed onto new claims (appended to `new[group]`), when that is cheaper than those bins. Returns
    (the bins kept, the bins dissolved)."""
    pool = groups[0].pool
    gone: list[fixedbins.Bin] = []
    for i, g in enumerate(groups):
        mine = [
            b
            for b in found
            if b.home == b.group == i and not b.added and all(ties.of(p).capped for p in b.kept) and b.kept
        ]
        if len(mine) < 2:
            continue
        cand = _candidate_types(pool, g.requirements)
        made = capped.pack([p for b in mine for p in b.kept], ties, index=pool.index, cand=cand) if cand else None
        if made is None:
            continue
        masks = fixedbins.options(pool, bases[i], np.array([used for _, used in made], dtype=np.int64))
        slots = []
        reuse = iter(mine)
        for (placed, used), options in zip(made, masks, strict=True):
            was = next(reuse, None)
            if was is not None:
                name, reqs = was.claim.name, was.claim.requirements
            else:
                name = f"hostname-placeholder-{next(names):04d}"
                reqs = g.requirements.add(requirements.Requirement(labels.LABEL_HOSTNAME, False, frozenset((name,))))
            slots.append(nodes.Slot(name, reqs, pool.taints, used, pool=pool, options=options, placed=placed))
        if sum(prices[i](s) for s in slots) < sum(b.price for b in mine) * (1 - _MIN_SAVING):
            new[i].extend(slots)
            gone += mine
    dropped = {id(b) for b in gone}
    return [b for b in found if id(b) not in dropped], gone


def _pack(group: _Group, movable: list[pods.Pod], *, names: Iterator[int]) -> list[nodes.Slot] | None:
    """New claims for `movable` (in hand-out order): shapes are distinct request vectors."""
    pool = group.pool
    by_shape: dict[bytes, list[pods.Pod]] = collections.defaultdict(list)
    vec_of: dict[bytes, catalog.IntArray] = {}
    seen: dict[tuple[tuple[str, int], ...], bytes] = {}
    for p in movable:
        items = tuple(p.requests.items())
        b = seen.get(items)
        if b is None:
            v = pool.index.vector(p.requests)
            b = seen[items] = v.tobytes()
            vec_of.setdefault(b, v)
        by_shape[b].append(p)
    keys = sorted(by_shape)
    req = np.array([vec_of[k] for k in keys], dtype=np.int64)
    counts = np.array([len(by_shape[k]) for k in keys], dtype=np.int64)
    cand = _candidate_types(pool, group.requirements)
    if cand is None:
        return None
    plan = packing.pack(req, counts, packing.collapsed(cand, cand.usable))
    if plan is None:
        return None
    return _build_slots(group, plan, req, [by_shape[k] for k in keys], names)


def _bin_slots(
    found: list[fixedbins.Bin], *, pool: catalog.PoolCatalog, groups: list[_Group], bases: list[catalog.BoolArray]
) -> list[tuple[fixedbins.Bin, nodes.Slot]]:
    """The fixed bins as claims: hostname and (possibly narrowed) requirements, the pods kept, then those taken in;
    options are the group's types that hold them all."""
    by_group: dict[int, list[int]] = collections.defaultdict(list)
    for i, b in enumerate(found):
        by_group[b.group].append(i)
    options: list[catalog.BoolArray | None] = [None] * len(found)
    for g, at in by_group.items():
        masks = fixedbins.options(pool, bases[g], np.array([found[i].used for i in at], dtype=np.int64))
        for i, m in zip(at, masks, strict=True):
            options[i] = m
    out = []
    for b, mask in zip(found, options, strict=True):
        assert mask is not None  # every bin is in its group's batch
        claim = b.claim
        reqs = claim.requirements
        if b.group != b.home:
            # its group's requirements and its hostname: narrowing made home ∩ group the group's own
            host = claim.requirements.get(labels.LABEL_HOSTNAME)
            reqs = groups[b.group].requirements
            reqs = reqs if host is None else reqs.add(host)
        slot = nodes.Slot(
            claim.name,
            reqs,
            claim.taints,
            b.used.copy(),
            pool=pool,
            options=mask,
            placed=[*b.kept, *b.added],
            host_ports=list(claim.host_ports),  # pods with host ports are tied: all kept
        )
        out.append((b, slot))
    return out


class _Prices:
    """The price of a group's claim (its cheapest option's cheapest compatible offering): the group's claims share
    every offering requirement, so it depends on the options alone."""

    def __init__(self, pool: catalog.PoolCatalog, reqs: requirements.Requirements) -> None:
        self.prices = pool.offerings(reqs)[1]
        # by the mask's identity first (a pattern's claims share one mask; the entry keeps it alive), then content
        self._by_id: dict[int, tuple[catalog.BoolArray, float]] = {}
        self._known: dict[bytes, float] = {}

    def __call__(self, slot: nodes.Slot) -> float:
        options = slot.options
        assert options is not None
        same = self._by_id.get(id(options))
        if same is not None:
            return same[1]
        key = options.tobytes()
        found = self._known.get(key)
        if found is None:
            prices = self.prices[options]
            found = self._known[key] = float(prices.min()) if prices.size else float("inf")
        self._by_id[id(options)] = (options, found)
        return found


def _candidate_types(pool: catalog.PoolCatalog, reqs: requirements.Requirements) -> packing.Types | None:
    ok, price = pool.offerings(reqs)
    ids = np.flatnonzero(pool.mask(reqs) & ok)
    if not len(ids):
        return None
    usable = np.maximum(pool.usable[ids], 0)
    anchor = np.ones(len(ids), dtype=np.bool_)
    if reqs.has_min_values():
        # A node filled within type t's capacity keeps every type at least as large as t among its options.
        covers = (usable[None, :, :] >= usable[:, None, :]).all(axis=2)  # [t, t']: t' fits whatever fits t
        anchor = np.array([min_values_ok(pool, ids[covers[t]], reqs) for t in range(len(ids))], dtype=np.bool_)
        if not anchor.any():
            return None
    return packing.Types(ids, usable, price[ids].astype(np.float64), anchor)


def min_values_ok(pool: catalog.PoolCatalog, type_ids: catalog.IntArray, reqs: requirements.Requirements) -> bool:
    """Do the types `type_ids` of `pool` offer at least minValues distinct values for every key that sets one?"""
    return types.satisfies_min_values([pool.types[int(i)] for i in type_ids], reqs)


# --- claims -----------------------------------------------------------------------------------------------------
def _build_slots(
    group: _Group,
    patterns: list[tuple[catalog.IntArray, int]],
    req: catalog.IntArray,
    shape_pods: list[list[pods.Pod]],
    fresh: Iterator[int],
) -> list[nodes.Slot] | None:
    pool = group.pool
    base = pool.mask(group.requirements) & pool.offerings(group.requirements)[0]
    names = [c.name for c in group.claims]
    reused = [c.requirements for c in group.claims]  # already pinned to their own hostnames
    cursor = [0] * len(shape_pods)
    out: list[nodes.Slot] = []
    for pattern, reps in patterns:
        used = pattern @ req
        options = base & (pool.usable >= used[None, :]).all(axis=1)
        if not options.any():
            return None
        if group.requirements.has_min_values() and not min_values_ok(pool, np.flatnonzero(options), group.requirements):
            return None
        takes = [(int(s), int(pattern[s])) for s in np.flatnonzero(pattern)]
        for _ in range(reps):
            if len(out) < len(names):
                name, reqs = names[len(out)], reused[len(out)]
            else:
                name = f"hostname-placeholder-{next(fresh):04d}"
                # The canonical In form, built directly: Requirement.new's parsing costs more than the rest of a
                # claim, and the repack may create tens of thousands.
                reqs = group.requirements.add(
                    requirements.Requirement(labels.LABEL_HOSTNAME, False, frozenset((name,)))
                )
            placed: list[pods.Pod] = []
            for s, n in takes:
                placed.extend(shape_pods[s][cursor[s] : cursor[s] + n])
                cursor[s] += n
            out.append(
                nodes.Slot(
                    name,
                    reqs,
                    pool.taints,
                    used.copy(),
                    pool=pool,
                    options=options,
                    placed=placed,
                )
            )
    if cursor != [len(p) for p in shape_pods]:
        return None
    return out


def _fit_limits(group: _Group, slots: list[nodes.Slot]) -> bool:
    """Make the repack use no more of any NodePool limit than the claims it replaces, each claim charged its largest
    option's capacity as the solver charges: options are trimmed to the cheapest option's capacity plus an equal
    share of the slack. False when even the cheapest options exceed what the original claims were charged."""
    pool = group.pool
    for name in pool.pool.limits:
        if name == labels.RESOURCE_NODES:
            if len(slots) > len(group.claims):
                return False
            continue
        if name not in pool.index.names:
            continue
        cap = pool.capacity[:, pool.index.names.index(name)]
        budget = sum(int(cap[c.options].max()) for c in group.claims if c.options is not None and c.options.any())
        cheapest = [int(cap[_cheapest_option(pool, s)]) for s in slots]
        slack = (budget - sum(cheapest)) // max(1, len(slots))
        if slack < 0:
            return False
        for s, least in zip(slots, cheapest, strict=True):
            assert s.options is not None
            s.options = s.options & (cap <= least + slack)
            if group.requirements.has_min_values() and not min_values_ok(
                pool, np.flatnonzero(s.options), group.requirements
            ):
                return False
    return True


def _cheapest_option(pool: catalog.PoolCatalog, slot: nodes.Slot) -> int:
    assert slot.options is not None
    prices = np.where(slot.options, pool.offerings(slot.requirements)[1], np.inf)
    return int(np.argmin(prices))
