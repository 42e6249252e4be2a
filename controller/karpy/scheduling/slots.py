"""Per-slot numpy columns that let the solver skip, in one vectorised step, slots that certainly refuse a pod.

Two necessary conditions of `nodes.evaluate` are kept as columns over slot ids (existing nodes, then claims):

* resource headroom: the per-resource maximum over a slot's remaining options of allocatable (minus daemon
  overhead) less what is already placed — an upper bound on what any single option has left, so a request above it
  cannot fit (options only shrink and usage only grows, so headroom only falls);
* single-valued domains: for each topology key asked about, the code of the one value a slot is pinned to (-1 when
  the slot still allows several), so a group's per-domain counts decide in one lookup that a pinned slot is outside
  the domains the group allows (`Group.next_domains` would answer the empty set).

Both are filters only: a slot that passes is still checked in full, so pre-filtering never changes a placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from karpy import requirements
from karpy.scheduling import catalog, nodes, topology

_INITIAL_ROWS = 256


@dataclass(slots=True)
class _KeyColumn:
    """Codes of the single domain each slot is pinned to for one topology key (-1: several or none)."""

    ids: dict[str, int] = field(default_factory=dict)
    codes: catalog.IntArray = field(default_factory=lambda: np.full(_INITIAL_ROWS, -1, dtype=np.int64))

    def code(self, domain: str) -> int:
        found = self.ids.get(domain)
        if found is None:
            found = self.ids[domain] = len(self.ids)
        return found


@dataclass(slots=True)
class _GroupColumn:
    """A group's counts per domain code, replayed from `Group.history` up to `synced`."""

    counts: catalog.IntArray = field(default_factory=lambda: np.zeros(16, dtype=np.int64))
    synced: int = 0


class SlotTable:
    def __init__(self, n_resources: int) -> None:
        self.n = 0
        self.cap: catalog.IntArray = np.zeros((_INITIAL_ROWS, n_resources), dtype=np.int64)
        self.used: catalog.IntArray = np.zeros((_INITIAL_ROWS, n_resources), dtype=np.int64)
        self.slots: list[nodes.Slot] = []
        self._seen: list[requirements.Requirements | None] = []  # requirements the domain codes were read from
        self._keys: dict[str, _KeyColumn] = {}
        self._groups: dict[topology.GroupKey, _GroupColumn] = {}

    # --- maintenance ----------------------------------------------------------------------------------------
    def _grow(self, rows: int) -> None:
        """Room for at least `rows` slots (doubling, so appends one at a time stay cheap)."""
        if rows <= len(self.cap):
            return
        grow = max(len(self.cap), rows - len(self.cap))
        self.cap = np.concatenate([self.cap, np.zeros((grow, self.cap.shape[1]), dtype=np.int64)])
        self.used = np.concatenate([self.used, np.zeros((grow, self.used.shape[1]), dtype=np.int64)])
        for col in self._keys.values():
            col.codes = np.concatenate([col.codes, np.full(grow, -1, dtype=np.int64)])

    def add_nodes(self, added: Sequence[nodes.Slot]) -> None:
        """Append existing nodes' slots, as `add` does one by one (their headroom is their allocatable), in one
        step: a cluster's thousands of nodes start every solve."""
        start, end = self.n, self.n + len(added)
        self._grow(end)
        if added:
            self.cap[start:end] = np.array([slot.alloc for slot in added], dtype=np.int64)
            self.used[start:end] = [slot.used for slot in added]
        self.slots.extend(added)
        self._seen.extend(slot.requirements for slot in added)
        self.n = end
        for key, col in self._keys.items():
            for i in range(start, end):
                col.codes[i] = self._pinned(self.slots[i], key, col)

    def add(self, slot: nodes.Slot, *, like: int | None = None) -> int:
        """Append a slot; `like` names a slot with the same options whose headroom bound can be copied."""
        i = self.n
        self._grow(i + 1)
        self.slots.append(slot)
        self._seen.append(None)
        self.n += 1
        if like is None:
            self.tighten(i)
        else:
            self.cap[i] = self.cap[like]
        self.refresh(i)
        return i

    def tighten(self, i: int) -> None:
        """Recompute slot `i`'s headroom bound from its current options. Between calls the bound may be stale,
        which is safe: options only shrink, so an older maximum is still an upper bound."""
        slot = self.slots[i]
        if slot.pool is None:
            assert slot.alloc is not None
            self.cap[i] = slot.alloc
        else:
            assert slot.options is not None
            usable = slot.pool.usable[slot.options]
            self.cap[i] = usable.max(axis=0) if len(usable) else -1

    def refresh(self, i: int) -> None:
        """Re-read slot `i`'s usage and pinned domains after pods were placed on it."""
        slot = self.slots[i]
        self.used[i] = slot.used
        if self._seen[i] is slot.requirements:
            return
        self._seen[i] = slot.requirements
        for key, col in self._keys.items():
            col.codes[i] = self._pinned(slot, key, col)

    @staticmethod
    def _pinned(slot: nodes.Slot, key: str, col: _KeyColumn) -> int:
        req = slot.requirements.get(key)
        values = req.values() if req is not None else None
        if values is not None and len(values) == 1:
            return col.code(next(iter(values)))
        return -1

    def _key(self, key: str) -> _KeyColumn:
        col = self._keys.get(key)
        if col is None:
            col = self._keys[key] = _KeyColumn(codes=np.full(len(self.cap), -1, dtype=np.int64))
            for i in range(self.n):
                col.codes[i] = self._pinned(self.slots[i], key, col)
        return col

    def _group_counts(self, g: topology.Group, col: _KeyColumn) -> catalog.IntArray:
        gc = self._groups.get(g.key)
        if gc is None:
            gc = self._groups[g.key] = _GroupColumn()
        for domain, count in g.history[gc.synced :]:
            code = col.code(domain)
            if code >= len(gc.counts):
                gc.counts = np.concatenate([gc.counts, np.zeros(max(code + 1, 2 * len(gc.counts)), np.int64)])
            gc.counts[code] += count
        gc.synced = len(g.history)
        if len(col.ids) + 1 > len(gc.counts):
            gc.counts = np.concatenate([gc.counts, np.zeros(len(col.ids) + 1, np.int64)])
        return gc.counts

    # --- queries --------------------------------------------------------------------------------------------
    def pinned(self, key: str, among: catalog.IntArray) -> tuple[catalog.IntArray, list[str]]:
        """(code of the one `key` domain each slot id in `among` is pinned to, -1 for several or none; the domain
        of each code)."""
        col = self._key(key)
        return col.codes[among], list(col.ids)  # codes are handed out in insertion order

    def fitting(self, request: catalog.IntArray) -> catalog.BoolArray:
        """Slots whose headroom admits `request` (a necessary condition of any fit)."""
        n = self.n
        out: catalog.BoolArray = np.ones(n, dtype=np.bool_)
        for r in np.flatnonzero(request > 0).tolist():  # column by column: no gathered copy of the columns
            out &= self.cap[:n, r] - self.used[:n, r] >= request[r]
        return out

    def fits(self, i: int, request: catalog.IntArray) -> bool:
        """Does slot `i`'s headroom admit `request`?"""
        need = request > 0
        return bool(np.all(self.cap[i, need] - self.used[i, need] >= request[need]))

    def domain_filter(
        self,
        g: topology.Group,
        *,
        self_selecting: bool,
        pod_domains: requirements.Requirement,
    ) -> tuple[catalog.IntArray, catalog.BoolArray] | None:
        """(pinned-domain code per slot, allowed per code) for group `g`; None when `g` excludes no slot."""
        col = self._key(g.key.topology_key)
        counts = self._group_counts(g, col)
        kind = g.key.kind
        if kind is topology.Kind.SPREAD and not g.key.inverse:
            low = g.min_count(pod_domains)
            ok = counts + (1 if self_selecting else 0) - low <= g.key.max_skew
        elif kind is topology.Kind.AFFINITY and not g.key.inverse:
            if any(pod_domains.has(d) for d in g.positive):
                ok = counts > 0
            elif self_selecting:
                return None
            else:
                ok = np.zeros(len(counts), dtype=np.bool_)
        else:
            ok = counts == 0
        return col.codes, ok

    def allowed(
        self,
        g: topology.Group,
        *,
        self_selecting: bool,
        pod_domains: requirements.Requirement,
        among: catalog.IntArray | None = None,
    ) -> catalog.BoolArray | None:
        """Slots (all, or the ids in `among`) not excluded by group `g` through the domain they are pinned to."""
        found = self.domain_filter(g, self_selecting=self_selecting, pod_domains=pod_domains)
        if found is None:
            return None
        codes, ok = found
        picked = codes[: self.n] if among is None else codes[among]
        out: catalog.BoolArray = np.where(picked < 0, True, ok[picked])
        return out
