"""Cost post-pass: re-pack groups of interchangeable new claims so their total $/h approaches the LP bound.

First-fit-decreasing fills claims in CPU-then-memory order, so early claims are CPU-bound and late ones memory-bound,
and each is then sized to its binding dimension. This pass takes claims that can be freely re-packed — same pool,
same requirements (hostname aside: zone, capacity type and every other key stay as they were), not relaxed for
minValues — and whose pods are not tied to their particular claim: no host ports, no hostname-keyed spread /
(anti-)affinity of their own (required or preferred), and not selected by any hostname-keyed topology group. Moving
such a pod between claims of one group changes no topology count: every other key's domains are identical there.

For each group (pods counted per request vector, so the work scales with distinct shapes, not pods):
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
The result replaces the group only if it is cheaper, keeps minValues for every claim and uses no more of any
NodePool limit (summed over claims, each charged its largest option as the solver charges) than the original.
Deterministic: pods are handed out per shape in (namespace, name) order, so the bulk and pod-by-pod paths give
the same plan.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from karpy.api import labels
from karpy.scheduling import catalog, nodes, packing, pods, requirements, topology

_POD_ORDER = operator.attrgetter("namespace", "name")  # the hand-out order of a shape's pods (any fixed one)
_MIN_SAVING = 1e-9  # relative: a repack must be cheaper than this to replace the original claims


@dataclass(slots=True)
class _Group:
    pool: catalog.PoolCatalog
    requirements: requirements.Requirements  # hostname excluded
    claims: list[nodes.Slot]


def repack(claims: Sequence[nodes.Slot], *, topo: topology.Topology) -> list[nodes.Slot]:
    """`claims` (in order) with every freely re-packable group replaced by a cheaper packing when one is found; the
    new claims of a group take the place of its first claim."""
    tied = _TiedPods(topo)
    groups: dict[tuple[str, requirements.Requirements], _Group] = {}
    member: dict[int, tuple[str, requirements.Requirements]] = {}
    for i, slot in enumerate(claims):
        if slot.pool is None or slot.min_values_relaxed or not slot.placed or any(tied(p) for p in slot.placed):
            continue
        key = (slot.pool.name, slot.requirements.without(labels.LABEL_HOSTNAME))
        groups.setdefault(key, _Group(slot.pool, key[1], [])).claims.append(slot)
        member[i] = key
    replaced: dict[tuple[str, requirements.Requirements], list[nodes.Slot]] = {}
    next_name = len(claims)
    for key, group in groups.items():
        better = _repack_group(group, first_name=next_name)
        if better is not None:
            replaced[key] = better
            next_name += max(0, len(better) - len(group.claims))
    out: list[nodes.Slot] = []
    for i, slot in enumerate(claims):
        own = member.get(i)
        if own is None or own not in replaced:
            out.append(slot)
        elif slot is groups[own].claims[0]:
            out.extend(replaced[own])
    return out


class _TiedPods:
    """Is a pod tied to its claim? Host ports, hostname-keyed terms of its own, or selected by a hostname group."""

    def __init__(self, topo: topology.Topology) -> None:
        self.topo = topo
        self.host_groups = [g for g in topo.groups.values() if g.key.topology_key == labels.LABEL_HOSTNAME]
        self._selected: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}

    def __call__(self, pod: pods.Pod) -> bool:
        if pod.host_ports:
            return True
        if not self.host_groups and not (
            pod.spread or pod.affinity or pod.anti_affinity or pod.preferred_affinity or pod.preferred_anti_affinity
        ):
            return False
        terms = [
            *(s.topology_key for s in pod.spread),
            *(t.topology_key for t in (*pod.affinity, *pod.anti_affinity)),
            *(w.term.topology_key for w in (*pod.preferred_affinity, *pod.preferred_anti_affinity)),
        ]
        if labels.LABEL_HOSTNAME in terms:
            return True
        if not self.host_groups:
            return False
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._selected.get(key)
        if found is None:
            found = any(g.selects(pod, self.topo.namespace_labels) for g in self.host_groups)
            self._selected[key] = found
        return found


def _repack_group(group: _Group, *, first_name: int) -> list[nodes.Slot] | None:
    pool = group.pool
    prices = _Prices(pool, group.requirements)
    original_cost = sum(prices(c) for c in group.claims)
    # Shapes: distinct request vectors, with their pods in key order (deterministic hand-out).
    by_shape: dict[bytes, list[pods.Pod]] = collections.defaultdict(list)
    vec_of: dict[bytes, catalog.IntArray] = {}
    seen: dict[tuple[tuple[str, int], ...], bytes] = {}
    for slot in group.claims:
        for p in slot.placed:
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
    plan = packing.pack(req, counts, cand)
    if plan is None:
        return None
    slots = _build_slots(group, plan, req, [sorted(by_shape[k], key=_POD_ORDER) for k in keys], first_name)
    if slots is None:
        return None
    if pool.pool.limits and not _fit_limits(group, slots):
        return None
    new_cost = sum(prices(s) for s in slots)
    if new_cost >= original_cost * (1 - _MIN_SAVING):
        return None
    return slots


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
    for key, r in reqs.items():
        if r.min_values is None:
            continue
        chosen = [pool.types[int(i)] for i in type_ids]
        if key == labels.LABEL_INSTANCE_TYPE:
            distinct = {t.name for t in chosen}
        else:
            distinct = {t.labels[key] for t in chosen if key in t.labels and r.has(t.labels[key])}
            if not distinct and key in (labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE):
                distinct = {o.labels().get(key, "") for t in chosen for o in t.offerings if o.available}
        if len(distinct) < r.min_values:
            return False
    return True


# --- claims -----------------------------------------------------------------------------------------------------
def _build_slots(
    group: _Group,
    patterns: list[tuple[catalog.IntArray, int]],
    req: catalog.IntArray,
    shape_pods: list[list[pods.Pod]],
    first_name: int,
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
                name = f"hostname-placeholder-{first_name + len(out) - len(names):04d}"
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
