"""Local search over a small solve's new claims, after the repack: move pods between claims, swap pairs of pods, and
empty claims, while each step lowers the plan's $/h.

First-fit and the repack's patterns leave each claim sized to what it happened to take. On a mix whose hostname
rules force many nodes (a pod per node under anti-affinity), every node is small and what each wastes up to its
cheapest type is a large share of the cost; a solve of at most `SEARCH_PODS` pods can afford to look for a better
spread. Each pass: every pod that may move goes to the claim where the plan gets cheapest (or a new claim of its
own), if that is cheaper; every such pod swaps with the pod of another claim that lowers the cost most, if any
does; every claim, cheapest first, is emptied when the others take its pods for less than it costs. Passes repeat
until one changes nothing (at most `_PASSES`, and not past the solve's deadline).

Every step keeps every rule the scheduler enforced:
* only claims of a pool without limits, without minValues, not relaxed for minValues and without host ports take
  part (each of those would need the claim re-checked whole); pods move within their pool;
* a pod moves only when nothing ties it to its claim (`tying`: no host ports, no hostname-keyed affinity owned or
  selecting it) or every hostname rule it owns is a per-node cap (`tying.Traits.capped`); for every capped rule
  owned on the claim it joins (by it or a pod there), the pods the rule selects there stay within the cap (the rule
  `capped` packs by), and no other hostname-keyed term owned there selects it (`fixedbins`);
* it joins a claim whose requirements (hostname aside) are its own claim's, or narrower ones when no rule keyed on
  anything but hostname counts it or is owned by it (`tying.Traits.pinned_by_domains`): no zone or other domain's
  count moves, and the requirements it was placed under still hold;
* a changed claim's options are the types of its requirements whose usable room (allocatable less DaemonSet
  overhead) holds its pods, so its requests fit every type it offers; its cost is the cheapest of them.
The result replaces the claims only when it is cheaper, priced as the claims are. Deterministic: pods and claims are
visited in plan order, ties going to the first. Pure numpy; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import catalog, nodes, pods, topology
from karpy.scheduling.optimizer import capped, fixedbins, tying

# Solves placing at most this many pods on the claims that take part are searched. A pass costs about pods² (every
# swap is priced): bench/scheduling.py, diverse mix, 100 pods on the AWS catalog: ~0.1 CPU s for 6% less cost.
SEARCH_PODS = 400
_PASSES = 20  # passes at most; on the diverse mix the search settles in two or three
_GAIN = 1e-9  # relative to the starting cost: a step must save more than this


@dataclass(frozen=True, slots=True)
class _Group:
    """A pool's claims of one set of requirements (hostname aside) and the types they may buy."""

    pool: catalog.PoolCatalog
    requirements: requirements.Requirements
    base: catalog.BoolArray  # the pool's types these requirements allow, with an offering they allow
    usable: catalog.IntArray  # of the undominated ones among those, cheapest first, in the searched columns
    price: catalog.FloatArray


@dataclass(slots=True)
class _Claim:
    slot: nodes.Slot | None  # None: opened by the search
    group: int
    placed: list[int] = field(default_factory=list)  # pod ids
    changed: bool = False


def improve(
    claims: Sequence[nodes.Slot],
    *,
    topo: topology.Topology,
    names: Iterator[int],
    expired: Callable[[], bool] = lambda: False,
) -> list[nodes.Slot]:
    """`claims` with pods moved between those that take part while that lowers the cost: claims left as they were
    are the same objects, emptied ones are gone, and opened ones (named from `names`) follow the last claim of their
    group. The claims as they were when the search is not worth it (too many pods) or finds nothing cheaper."""
    taking_part = [i for i, c in enumerate(claims) if _takes_part(c)]
    if len(taking_part) < 2 or sum(len(claims[i].placed) for i in taking_part) > SEARCH_PODS:
        return list(claims)
    search = _Search([claims[i] for i in taking_part], tying.Ties(topo))
    if not search.run(expired):
        return list(claims)
    rebuilt = search.slots(names)
    before = sum(_price(claims[i]) for i in taking_part)
    if sum(_price(s) for slots in rebuilt for s in slots) >= before * (1 - _GAIN):
        return list(claims)
    out: list[nodes.Slot] = []
    at = dict(zip(taking_part, rebuilt, strict=True))
    for i, slot in enumerate(claims):
        out += at.get(i, [slot])
    return out


def _takes_part(slot: nodes.Slot) -> bool:
    pool = slot.pool
    return (
        pool is not None
        and bool(slot.placed)
        and not slot.min_values_relaxed
        and not slot.host_ports
        and not pool.pool.limits
        and not slot.requirements.has_min_values()
    )


def _price(slot: nodes.Slot) -> float:
    """What a claim costs: its cheapest option's cheapest offering its requirements allow."""
    assert slot.pool is not None
    assert slot.options is not None
    prices = slot.pool.offerings(slot.requirements)[1][slot.options]
    return float(prices.min()) if prices.size else float("inf")


class _Search:
    """The claims taking part, their pods and what the steps read of them, as arrays: per pod its requests (in the
    columns some pod asks for), whether it may move, whether its domains pin it, which capped rules it owns and which
    select it; per claim its usage, cost, counts per capped rule and owners per capped rule."""

    def __init__(self, slots: list[nodes.Slot], ties: tying.Ties) -> None:
        keys: dict[tuple[str, requirements.Requirements], int] = {}
        pools: dict[str, catalog.PoolCatalog] = {}
        self.claims: list[_Claim] = []
        self.pods: list[pods.Pod] = []
        for slot in slots:
            assert slot.pool is not None
            key = (slot.pool.name, slot.requirements.without(labels.LABEL_HOSTNAME))
            pools[slot.pool.name] = slot.pool
            claim = _Claim(slot, keys.setdefault(key, len(keys)))
            for p in slot.placed:
                claim.placed.append(len(self.pods))
                self.pods.append(p)
            self.claims.append(claim)
        index = next(iter(pools.values())).index  # one per solve
        full = np.array([index.vector(p.requests) for p in self.pods], dtype=np.int64).reshape(len(self.pods), -1)
        # only the resources some pod asks for decide a fit (no other column of a usage is ever above zero; a type
        # that can hold no pod has -1 in every column)
        self.columns = np.flatnonzero((full > 0).any(axis=0))
        self.full, self.vec = full, full[:, self.columns]
        self.groups = [_group(pools[name], reqs, self.columns) for name, reqs in keys]
        same_pool = np.array([[a.pool is b.pool for b in self.groups] for a in self.groups], dtype=np.bool_)
        # [a, b]: a pod on a claim of group a may join a claim of group b (b's requirements are a's, narrowed)
        self.narrows = fixedbins.narrowing([g.requirements for g in self.groups]) & same_pool.reshape(
            len(self.groups), len(self.groups)
        )
        traits = [ties.of(p) for p in self.pods]
        self.movable = np.array([not t.tied or bool(t.capped) for t in traits], dtype=np.bool_)
        self.pinned = np.array([t.pinned_by_domains for t in traits], dtype=np.bool_)
        caps: dict[topology.GroupKey, int] = {}
        for t in traits:
            caps.update(t.capped)
        rules = list(caps)
        self.cap = np.array([caps[r] for r in rules], dtype=np.int64)
        owned = [{k for k, _ in t.capped} for t in traits]
        self.own = np.array([[r in o for r in rules] for o in owned], dtype=np.int64).reshape(
            len(self.pods), len(rules)
        )
        selected = [[capped.selects(r, p) for r in rules] for p in self.pods]
        self.sel = np.array(selected, dtype=np.int64).reshape(len(self.pods), len(rules))
        # a claim where a pod that never moves owns a hostname-keyed term other than a cap takes no pod it selects
        self.blocked = np.zeros((len(self.claims), len(self.pods)), dtype=np.bool_)
        for i, c in enumerate(self.claims):
            terms = [term for q in c.placed if not self.movable[q] for term in traits[q].terms]
            if terms:
                self.blocked[i] = [any(ties.selects(t, p) for t in terms) for p in self.pods]
        self.claim_of = np.zeros(len(self.pods), dtype=np.int64)
        for i, c in enumerate(self.claims):
            self.claim_of[c.placed] = i
        self.group_of = np.array([c.group for c in self.claims], dtype=np.int64)
        self.alive = np.ones(len(self.claims), dtype=np.bool_)
        self.used = np.array([self.vec[c.placed].sum(axis=0) for c in self.claims], dtype=np.int64)
        self.counts = np.array([self.sel[c.placed].sum(axis=0) for c in self.claims], dtype=np.int64)
        self.owners = np.array([self.own[c.placed].sum(axis=0) for c in self.claims], dtype=np.int64)
        self.price = np.array([self.cost(c.group, self.used[i]) for i, c in enumerate(self.claims)])
        self.threshold = float(self.price.sum()) * _GAIN

    # --- prices ----------------------------------------------------------------------------------------------
    def cost(self, group: int, used: catalog.IntArray) -> float:
        """What a claim of `group` using `used` costs (0 when empty, inf when no type holds it)."""
        return float(self.costs(group, used[None, :])[0])

    def costs(self, group: int, used: catalog.IntArray) -> catalog.FloatArray:
        """`cost` of each row of `used`."""
        g = self.groups[group]
        fits = g.usable[None, :, 0] >= used[:, 0, None]
        for r in range(1, used.shape[1]):  # column by column: no rows × types × columns temporary
            fits &= g.usable[None, :, r] >= used[:, r, None]
        out: catalog.FloatArray = np.where(fits.any(axis=1), g.price[np.argmax(fits, axis=1)], np.inf)
        out[~used.any(axis=1)] = 0.0
        return out

    def _costs_at(self, at: catalog.IntArray, used: catalog.IntArray) -> catalog.FloatArray:
        """`cost` of each claim of `at` if it used the row of `used` at the same position."""
        out = np.zeros(len(at))
        groups = self.group_of[at]
        for g in np.unique(groups).tolist():
            rows = groups == g
            out[rows] = self.costs(g, used[rows])
        return out

    # --- steps -----------------------------------------------------------------------------------------------
    def run(self, expired: Callable[[], bool]) -> bool:
        """Search; True when some step was taken."""
        movable = np.flatnonzero(self.movable).tolist()
        taken = False
        for _ in range(_PASSES):
            gained = False
            for step in (self._relocate, self._swap):
                for p in movable:
                    if expired():
                        return taken
                    gained |= step(p)
            for c in np.argsort(self.price, kind="stable").tolist():
                if self.alive[c]:
                    gained |= self._empty(c)
            taken |= gained
            if not gained:
                break
        return taken

    def _allowed(
        self, ps: catalog.IntArray, at: catalog.IntArray, *, leaving: catalog.IntArray | None = None
    ) -> catalog.BoolArray:
        """Whether each pod of `ps` may join the claim at the same position of `at` (the pod at that position of
        `leaving` leaving it meanwhile)."""
        groups = self.group_of[at]
        src = self.group_of[self.claim_of[ps]]
        ok: catalog.BoolArray = np.where(self.pinned[ps], groups == src, self.narrows[src, groups])
        ok &= ~self.blocked[at, ps]
        if len(self.cap):
            counts, owners = self.counts[at], self.owners[at]
            if leaving is not None:
                counts, owners = counts - self.sel[leaving], owners - self.own[leaving]
            active = (owners > 0) | (self.own[ps] > 0)  # a cap binds where one of its owners is
            ok &= ~((counts + self.sel[ps] > self.cap[None, :]) & active).any(axis=1)
        return ok

    def _relocate(self, p: int) -> bool:
        """Move pod `p` where the plan gets cheapest (another claim, or one of its own), when that is cheaper."""
        here = int(self.claim_of[p])
        group = int(self.group_of[here])
        saving = self.price[here] - self.cost(group, self.used[here] - self.vec[p])
        at = np.flatnonzero(self.alive)
        at = at[at != here]
        at = at[self._allowed(np.full(len(at), p), at)]
        best, best_delta = -1, -self.threshold
        if len(at):
            delta = self._costs_at(at, self.used[at] + self.vec[p][None, :]) - self.price[at] - saving
            k = int(np.argmin(delta))
            if delta[k] < best_delta:
                best, best_delta = int(at[k]), float(delta[k])
        if len(self.claims[here].placed) > 1 and self.cost(group, self.vec[p]) - saving < best_delta:
            best = self._open(group)  # a lone pod is within every cap
        if best < 0:
            return False
        self._move(p, here, best)
        return True

    def _swap(self, p: int) -> bool:
        """Swap pod `p` with the pod of another claim that lowers the cost most, if one does."""
        here = int(self.claim_of[p])
        # pods of other claims asking for other requests (swapping equal requests changes no cost)
        qs = np.flatnonzero(self.movable & (self.claim_of != here) & (self.vec != self.vec[p]).any(axis=1))
        there = self.claim_of[qs]
        back = np.full(len(qs), here, dtype=np.int64)
        ok = self._allowed(np.full(len(qs), p), there, leaving=qs) & self._allowed(
            qs, back, leaving=np.full(len(qs), p)
        )
        qs, there, back = qs[ok], there[ok], back[ok]
        if not len(qs):
            return False
        mine = self._costs_at(back, self.used[here][None, :] - self.vec[p][None, :] + self.vec[qs])
        theirs = self._costs_at(there, self.used[there] - self.vec[qs] + self.vec[p][None, :])
        delta = mine + theirs - self.price[here] - self.price[there]
        k = int(np.argmin(delta))
        if delta[k] >= -self.threshold:
            return False
        q, dst = int(qs[k]), int(there[k])
        self._move(p, here, dst)
        self._move(q, dst, here)
        return True

    def _empty(self, c: int) -> bool:
        """Move every pod off claim `c`, largest first, each where it adds least, when that costs less than `c`;
        otherwise put them back."""
        placed = list(self.claims[c].placed)
        if not placed or not self.movable[placed].all():
            return False
        before = float(self.price.sum())
        done: list[tuple[int, int]] = []
        self.alive[c] = False
        for p in sorted(placed, key=lambda q: tuple((-self.vec[q]).tolist())):
            at = np.flatnonzero(self.alive)
            at = at[self._allowed(np.full(len(at), p), at)]
            if not len(at):
                break
            delta = self._costs_at(at, self.used[at] + self.vec[p][None, :]) - self.price[at]
            k = int(np.argmin(delta))
            if not np.isfinite(delta[k]):  # no claim holds it
                break
            dst = int(at[k])
            self._move(p, c, dst)
            done.append((p, dst))
        if len(done) == len(placed) and float(self.price.sum()) < before - self.threshold:
            return True
        self.alive[c] = True
        for p, dst in reversed(done):
            self._move(p, dst, c)
        return False

    def _open(self, group: int) -> int:
        """A new, empty claim of `group`; its id."""
        self.claims.append(_Claim(None, group))
        self.group_of = np.append(self.group_of, group)
        self.alive = np.append(self.alive, True)
        self.price = np.append(self.price, 0.0)
        self.used, self.counts, self.owners, self.blocked = (
            np.vstack([a, np.zeros((1, a.shape[1]), a.dtype)])
            for a in (self.used, self.counts, self.owners, self.blocked)
        )
        return len(self.claims) - 1

    def _move(self, p: int, src: int, dst: int) -> None:
        for i, sign in ((src, -1), (dst, 1)):
            c = self.claims[i]
            if sign < 0:
                c.placed.remove(p)
            else:
                c.placed.append(p)
            c.changed = True
            self.used[i] += sign * self.vec[p]
            self.counts[i] += sign * self.sel[p]
            self.owners[i] += sign * self.own[p]
            self.price[i] = self.cost(c.group, self.used[i])
        self.claim_of[p] = dst

    # --- result ----------------------------------------------------------------------------------------------
    def slots(self, names: Iterator[int]) -> list[list[nodes.Slot]]:
        """Per claim taking part, the claims standing in its place: itself (the same object when unchanged; none
        when emptied), then, after the last claim of each group, the claims opened in that group."""
        out: list[list[nodes.Slot]] = []
        last: dict[int, int] = {}
        for i, c in enumerate(self.claims):
            if c.slot is not None:
                last[c.group] = i
                out.append([self._slot(i, c.slot.name, c.slot.requirements)] if c.placed else [])
            elif c.placed:
                name = f"hostname-placeholder-{next(names):04d}"
                host = requirements.Requirement(labels.LABEL_HOSTNAME, False, frozenset((name,)))
                out[last[c.group]].append(self._slot(i, name, self.groups[c.group].requirements.add(host)))
        return out

    def _slot(self, i: int, name: str, reqs: requirements.Requirements) -> nodes.Slot:
        c = self.claims[i]
        if c.slot is not None and not c.changed:
            return c.slot
        g = self.groups[c.group]
        used = self.full[c.placed].sum(axis=0)
        options = g.base & (g.pool.usable >= used[None, :]).all(axis=1)
        placed = [self.pods[q] for q in c.placed]
        return nodes.Slot(name, reqs, g.pool.taints, used, pool=g.pool, options=options, placed=placed)


def _group(pool: catalog.PoolCatalog, reqs: requirements.Requirements, columns: catalog.IntArray) -> _Group:
    ok, price = pool.offerings(reqs)
    base = pool.mask(reqs) & ok
    ids = np.flatnonzero(base)
    ids = ids[np.lexsort((ids, price[ids]))]  # cheapest first
    # a type that a cheaper one (or an equal one listed first) covers in every column is never the cheapest that
    # holds a usage: only the others are searched
    room = pool.usable[:, columns]
    front: list[int] = []
    held = np.zeros((0, len(columns)), dtype=np.int64)
    for t in ids.tolist():
        if not (held >= room[t][None, :]).all(axis=1).any():
            front.append(t)
            held = room[front]
    return _Group(pool, reqs, base, held, price[front])
