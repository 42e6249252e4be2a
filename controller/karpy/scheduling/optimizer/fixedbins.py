"""Claims the repack may not dissolve: fixed bins, split when cheaper apart, and filling the room they leave.

A claim with pods tied to it (`tying`) is a *fixed bin*: it keeps its tied pods, its hostname and its requirements;
the pods that may move leave it, and movable pods fill the room left on the bin's cheapest option (so the bin costs
no more). A pod may move to another claim of its pool whose requirements are its claim's own (zone, capacity type
and every other key stay as they were, so no count of a non-hostname domain changes), with one restriction: it may
not join a claim where a tied pod owns a hostname-keyed spread or anti-affinity term selecting it (the owner's
count, or its exclusion, would then break). A bin whose requirements are looser than a movable pod's (say no zone
yet, the pod's claim pinned to one) may take the pod and narrow to its requirements when no kept pod counts in, or
owns, a rule keyed on anything but hostname (so narrowing moves no count) and its cheapest option is as cheap
under the narrower requirements.
Pure numpy and Python; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import catalog, nodes, pods
from karpy.scheduling.optimizer import tying


@dataclass(slots=True)
class Bin:
    """A fixed bin: the claim, the pods that stay, the room its cheapest option leaves, and the group (index into
    the pool's requirement groups) whose requirements it has now (`home` until it narrows)."""

    claim: nodes.Slot
    kept: list[pods.Pod]
    used: catalog.IntArray  # what its pods use (the kept ones, then those `fill` adds)
    room: catalog.IntArray  # usable of the cheapest option holding `kept`, less `used`
    terms: list[tying.Term]
    home: int
    group: int
    narrowable: bool
    type_id: int
    price: float
    added: list[pods.Pod]


def bins(
    fixed: Sequence[nodes.Slot],
    ties: tying.Ties,
    *,
    pool: catalog.PoolCatalog,
    base: catalog.BoolArray,
    prices: catalog.FloatArray,
    group: int,
    names: Iterator[int],
) -> tuple[list[Bin], list[pods.Pod]] | None:
    """The fixed bins of `fixed` claims (of requirement group `group`) and the pods that leave them; None when a
    bin's kept pods fit no option."""
    if not fixed:
        return [], []
    vectors: dict[int, catalog.IntArray] = {}  # id(requests) -> vector: pods of a template share their requests

    def vector(p: pods.Pod) -> catalog.IntArray:
        found = vectors.get(id(p.requests))
        if found is None:
            found = vectors[id(p.requests)] = pool.index.vector(p.requests)
        return found

    kept: list[list[pods.Pod]] = []
    leaving: list[pods.Pod] = []
    for claim in fixed:
        stay: list[pods.Pod] = []
        for p in claim.placed:
            (stay if ties.tied(p) else leaving).append(p)
        kept.append(stay)
    zero = np.zeros(len(pool.index.names), np.int64)
    used = np.array([sum((vector(p) for p in k), zero) for k in kept], dtype=np.int64)
    cheapest = cheapest_options(pool, base, prices, used)
    if (cheapest < 0).any():
        return None
    fixed, kept, used, cheapest = _split(
        fixed, kept, used, cheapest, ties, pool=pool, base=base, prices=prices, vector=vector, names=names
    )
    out = [
        Bin(
            claim,
            k,
            used[i],
            pool.usable[cheapest[i]] - used[i],
            [t for p in k for t in ties.of(p).terms],
            group,
            group,
            not any(ties.of(p).pinned_by_domains for p in k),
            int(cheapest[i]),
            float(prices[cheapest[i]]),
            [],
        )
        for i, (claim, k) in enumerate(zip(fixed, kept, strict=True))
    ]
    return out, leaving


def _split(
    fixed: Sequence[nodes.Slot],
    kept: list[list[pods.Pod]],
    used: catalog.IntArray,
    cheapest: catalog.IntArray,
    ties: tying.Ties,
    *,
    pool: catalog.PoolCatalog,
    base: catalog.BoolArray,
    prices: catalog.FloatArray,
    vector: Callable[[pods.Pod], catalog.IntArray],
    names: Iterator[int],
) -> tuple[list[nodes.Slot], list[list[pods.Pod]], catalog.IntArray, catalog.IntArray]:
    """Bins whose kept pods cost less one to a node than together, split into one bin per kept pod.

    The first-fit placement puts pods of different hostname groups (one per group per node) on one claim and sizes
    it to them all; on a catalog whose small types are cheapest per pod (AWS spot) that node costs far more than one
    small node per pod, which the movable pods then fill. Apart, each pod keeps its claim's requirements (so no
    count of a non-hostname domain moves) on a node of its own: its spread and anti-affinity counts per hostname
    only fall. Bins with host ports, or a pod owning or selected by a hostname-keyed affinity (it relies on company),
    stay whole."""
    several = [i for i, k in enumerate(kept) if len(k) > 1 and not fixed[i].host_ports]
    if not several:
        return list(fixed), kept, used, cheapest
    singles = [p for i in several for p in kept[i]]
    alone = cheapest_options(pool, base, prices, np.array([vector(p) for p in singles], dtype=np.int64))
    out_fixed: list[nodes.Slot] = []
    out_kept: list[list[pods.Pod]] = []
    out_used: list[catalog.IntArray] = []
    out_cheapest: list[int] = []
    at = 0
    splitting = dict.fromkeys(several, 0)
    for i in several:
        splitting[i] = at
        at += len(kept[i])
    host = labels.LABEL_HOSTNAME
    for i, claim in enumerate(fixed):
        start = splitting.get(i)
        if start is not None:
            ids = alone[start : start + len(kept[i])]
            worth = (ids >= 0).all() and prices[ids].sum() < prices[cheapest[i]] * (1 - 1e-9)
            if worth and not any(ties.of(p).relies_on_company for p in kept[i]):
                reqs = claim.requirements.without(host)
                for n, (p, t) in enumerate(zip(kept[i], ids.tolist(), strict=True)):
                    if n == 0:
                        part = claim
                    else:
                        name = f"hostname-placeholder-{next(names):04d}"
                        named = reqs.add(requirements.Requirement(host, False, frozenset((name,))))
                        part = nodes.Slot(
                            name,
                            named,
                            claim.taints,
                            vector(p).copy(),
                            pool=claim.pool,
                            options=claim.options,
                            placed=[p],
                        )
                    out_fixed.append(part)
                    out_kept.append([p])
                    out_used.append(vector(p))
                    out_cheapest.append(t)
                continue
        out_fixed.append(claim)
        out_kept.append(kept[i])
        out_used.append(used[i])
        out_cheapest.append(int(cheapest[i]))
    return out_fixed, out_kept, np.array(out_used, dtype=np.int64), np.array(out_cheapest, dtype=np.int64)


def cheapest_options(
    pool: catalog.PoolCatalog, base: catalog.BoolArray, prices: catalog.FloatArray, used: catalog.IntArray
) -> catalog.IntArray:
    """Per row of `used`: the cheapest of the `base` types whose usable room holds it (-1 when none does)."""
    out = np.full(len(used), -1, dtype=np.int64)
    ids = np.flatnonzero(base)
    if not len(ids):
        return out
    order = ids[np.argsort(prices[ids], kind="stable")]
    fits, back = _fitting(pool.usable[order], used)
    picked = np.where(fits.any(axis=1), order[np.argmax(fits, axis=1)], -1)
    out[:] = picked[back]
    return out


def options(pool: catalog.PoolCatalog, base: catalog.BoolArray, used: catalog.IntArray) -> list[catalog.BoolArray]:
    """Per row of `used`: the `base` types whose usable room holds it (rows of equal usage share one mask)."""
    ids = np.flatnonzero(base)
    fits, back = _fitting(pool.usable[ids], used)
    masks = np.zeros((len(fits), len(base)), dtype=np.bool_)
    masks[:, ids] = fits
    distinct = list(masks)
    return [distinct[i] for i in back.tolist()]


def _fitting(usable: catalog.IntArray, used: catalog.IntArray) -> tuple[catalog.BoolArray, catalog.IntArray]:
    """(distinct rows of `used` × rows of `usable`: holds it, each row of `used`'s distinct row)."""
    distinct, back = np.unique(used.reshape(len(used), -1), axis=0, return_inverse=True)  # bins share usages
    fits = np.zeros((len(distinct), len(usable)), dtype=np.bool_)
    for start in range(0, len(distinct), 256):  # distinct usages × types × resources at a time
        block = distinct[start : start + 256]
        fits[start : start + 256] = np.all(usable[None, :, :] >= block[:, None, :], axis=2)
    return fits, back.ravel()


def fill(
    found: list[Bin],
    movable_by_group: Sequence[Sequence[pods.Pod]],
    ties: tying.Ties,
    *,
    index: catalog.ResourceIndex,
    narrows: catalog.BoolArray,
    prices: Sequence[catalog.FloatArray],
) -> list[list[pods.Pod]]:
    """Place movable pods (per requirement group, in hand-out order) in the bins' room: larger shapes first, each
    first fit over the bins in order, a bin taking a pod of its own group or (narrowable, not narrowed yet,
    `narrows[home, group]`, its cheapest option as cheap there) of a narrower one, never where a bin's term selects
    the pod. Returns, per group, the pods left."""
    if not found or not any(movable_by_group):
        return [list(m) for m in movable_by_group]
    full_room = np.array([b.room for b in found], dtype=np.int64)
    group = np.array([b.group for b in found], dtype=np.int64)
    home = group.copy()
    narrowable = np.array([b.narrowable for b in found], dtype=np.bool_)
    type_id = np.array([b.type_id for b in found], dtype=np.int64)
    price = np.array([b.price for b in found], dtype=np.float64)
    # bins share few distinct term sets (a deployment's pods own equal terms): decide admission per set, and treat
    # pods of one group with equal requests that the same sets admit as one class
    term_sets: dict[tuple[tying.Term, ...], int] = {}
    term_set = np.array([term_sets.setdefault(tuple(b.terms), len(term_sets)) for b in found], dtype=np.int64)
    # Both keyed by the identity of a pod's parts first: pods of one template share them (`pods.Interner`), and
    # the pods outlive this call, so no id is reused meanwhile.
    admission: dict[tuple[str, int], bytes] = {}
    shapes: dict[int, tuple[tuple[str, int], ...]] = {}
    per_class: dict[tuple[int, tuple[tuple[str, int], ...], bytes], list[pods.Pod]] = {}
    for g, movable in enumerate(movable_by_group):
        for p in movable:
            admits = admission.get((p.namespace, id(p.labels)))
            if admits is None:
                admits = admission[(p.namespace, id(p.labels))] = bytes(
                    not any(ties.selects(t, p) for t in ts) for ts in term_sets
                )
            shape = shapes.get(id(p.requests))
            if shape is None:
                shape = shapes[id(p.requests)] = tuple(sorted(p.requests.items()))
            per_class.setdefault((g, shape, admits), []).append(p)
    classes = list(per_class.items())
    cpu, memory = labels.RESOURCE_CPU, labels.RESOURCE_MEMORY

    def size(i: int) -> tuple[int, int, int]:
        req = dict(classes[i][0][1])
        return (-req.get(cpu, 0), -req.get(memory, 0), i)

    # Only the resources some pod asks for change or decide anything (every pod asks for a pods slot): the work
    # below runs on those alone, once per class over the bins that may still take one, with `room` held per
    # resource: a row of bins each, divided by one scalar at a time (numpy's fast path for integer division).
    wanted = np.array([index.vector(m[0].requests) for _, m in classes], dtype=np.int64)
    columns = np.flatnonzero((wanted > 0).any(axis=0))
    wanted, room = wanted[:, columns], np.ascontiguousarray(full_room[:, columns].T)
    least = {  # per group, the least each resource any of its classes asks: a bin with less takes none of them
        g: wanted[[i for i, ((cg, _, _), _) in enumerate(classes) if cg == g]].min(axis=0)
        for g, m in enumerate(movable_by_group)
        if m
    }
    most = room.max(axis=1)  # per resource, the most any bin has left (only falls): skip what no bin can take
    may_narrow = {  # per target group: bins that could narrow to it (if they have not narrowed yet)
        g: narrowable & narrows[home, g] & (prices[g][type_id] <= price * (1 + 1e-12)) for g in least
    }
    # per group, the bins that may ever take its pods (in order: its own, and those that could narrow to it) and
    # have room for its least class, with what of them never changes: whether each may narrow to the group, its
    # home, its term set
    candidates = {}
    for g, m in may_narrow.items():
        at_bins = np.flatnonzero(((home == g) | m) & (room >= least[g][:, None]).all(axis=0))
        candidates[g] = (at_bins, m[at_bins], home[at_bins], term_set[at_bins])
    left: list[list[pods.Pod]] = [[] for _ in movable_by_group]
    for i in sorted(range(len(classes)), key=size):
        (cls_group, _, admits), members = classes[i]
        req = wanted[i]
        if (req > most).any():
            left[cls_group] += members
            continue
        at_bins, narrowing_to, at_home, at_set = candidates[cls_group]
        now = group[at_bins]
        ok = (now == cls_group) | (narrowing_to & (now == at_home))
        ok &= np.frombuffer(admits, dtype=np.bool_)[at_set]
        usable = np.flatnonzero(ok)
        taking, take = _first_fit(room, at_bins[usable], req, len(members))
        chosen = at_bins[usable[taking]]
        group[chosen] = cls_group
        at = 0
        for b_id, n in zip(chosen.tolist(), take.tolist(), strict=True):
            found[b_id].added.extend(members[at : at + n])
            found[b_id].group = cls_group
            at += n
        left[cls_group] += members[at:]
        if at:
            most = room.max(axis=1)
            spent = usable[taking][(room[:, chosen] < least[cls_group][:, None]).any(axis=0)]
            if len(spent):  # bins that can take none of the group's pods any more: out of its candidates
                keep = np.ones(len(at_bins), dtype=np.bool_)
                keep[spent] = False
                candidates[cls_group] = (at_bins[keep], narrowing_to[keep], at_home[keep], at_set[keep])
    full_room[:, columns] = room.T
    for b, now_room in zip(found, full_room, strict=True):
        if b.added:
            b.used, b.room = b.used + (b.room - now_room), now_room
    return left


def _first_fit(
    room: catalog.IntArray, ids: catalog.IntArray, req: catalog.IntArray, count: int
) -> tuple[catalog.IntArray, catalog.IntArray]:
    """First fit of `count` pods asking `req` over the bins `ids` (in order), taken from their `room` (resources ×
    bins): (positions in `ids` of the bins that take some, how many each)."""
    fits = np.full(len(ids), count, dtype=np.int64)
    for row, amount in zip(room, req.tolist(), strict=True):
        if amount:  # one scalar divisor at a time: numpy's fast path for integer division
            np.minimum(fits, row[ids] // amount, out=fits)
    np.maximum(fits, 0, out=fits)
    take = np.clip(count - (np.cumsum(fits) - fits), 0, fits)
    taking = np.flatnonzero(take)
    room[:, ids[taking]] -= req[:, None] * take[taking][None, :]
    return taking, take[taking]


def narrowing(groups: Sequence[requirements.Requirements]) -> catalog.BoolArray:
    """[a, b]: group b's requirements are group a's narrowed (a bin of a may take b's pods and become b)."""
    n = len(groups)
    out = np.zeros((n, n), dtype=np.bool_)
    for a in range(n):
        for b in range(n):
            out[a, b] = a == b or groups[a].intersect(groups[b]) == groups[b]
    return out
