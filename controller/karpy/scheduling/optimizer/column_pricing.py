"""Pricing for the pattern LP of `patterns`: given class duals y, which node pattern of a small column is worth the
most (y·a), and a proven upper bound on that worth.

* `Pricer.greedy` fills one node per column at once (vectorised over columns) by three greedy orders: cheap, and
  it finds most improving patterns;
* `Pricer.exact` bounds every column's best pattern by a bounded-knapsack DP (`knapsack`) on a grid of each
  resource's units. Weights and capacity are rounded *down* to the grid, a relaxation: the DP's optimum is an upper
  bound however coarse the grid, and exact when the units divide every request. A column's last proven bound is
  reused while the duals move little (y'·a ≤ bound + (y' − y)⁺·a).

Pure numpy; no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from karpy.scheduling import catalog

GRID_CELLS = 4000  # knapsack DP table size cap while generating patterns; coarser units (still a relaxation)
FINE_CELLS = 60000  # the same when proving the bound
IMPROVES = 1e-7  # relative reduced cost a new pattern must beat


class Pricer:
    """Pricing of the small columns (`most`, `fit`: classes × those columns). Remembers each column's last proven
    bound: with duals y' later, y'·a ≤ bound + (y' − y)⁺·a, which often settles a column without a knapsack."""

    def __init__(
        self,
        req: catalog.IntArray,
        most: catalog.IntArray,
        fit: catalog.BoolArray,
        capacity: catalog.IntArray,
        price: catalog.FloatArray,
        *,
        cells: int,
        max_items: int,
    ) -> None:
        self.req, self.most, self.fit, self.capacity, self.price = req, most, fit, capacity, price
        self.cells = cells
        self.max_items = max_items  # no pattern holds more pods (bounds the greedy fill's steps)
        n_col = capacity.shape[0]
        self.size = (req[None, :, :] / np.maximum(capacity[:, None, :], 1)).astype(np.float64)  # columns × classes × r
        self.last_y: list[catalog.FloatArray | None] = [None] * n_col
        self.last_ub = np.zeros(n_col)

    def greedy(self, y: catalog.FloatArray) -> list[tuple[int, catalog.IntArray]]:
        """Improving patterns found greedily for every column at once: each node takes, one pod at a time, the
        fitting class of most dual value per share of the node (summed, or the largest share), or of most value."""
        found: list[tuple[int, catalog.IntArray]] = []
        usable = self.fit.T & (y > 0)[None, :]
        for weight in (self.size.sum(axis=2), self.size.max(axis=2), np.ones(self.size.shape[:2])):
            score = np.where(usable, y[None, :] / np.maximum(weight, 1e-12), -np.inf)
            take = self._fill(score)
            value = take @ y
            for i in np.flatnonzero(value > self.price * (1 + IMPROVES)):
                if not any(j == i and (t == take[i]).all() for j, t in found):
                    found.append((int(i), take[i]))
        return found

    def _fill(self, score: catalog.FloatArray) -> catalog.IntArray:
        n_col = self.capacity.shape[0]
        take = np.zeros((n_col, self.req.shape[0]), dtype=np.int64)
        free = self.capacity.copy()
        rows = np.arange(n_col)
        for _ in range(self.max_items):
            ok = (take < self.most.T) & (self.req[None, :, :] <= free[:, None, :]).all(axis=2)
            s = np.where(ok, score, -np.inf)
            pick = np.argmax(s, axis=1)
            live = np.isfinite(s[rows, pick])
            if not live.any():
                break
            take[rows[live], pick[live]] += 1
            free[live] -= self.req[pick[live]]
        return take

    def exact(self, y: catalog.FloatArray) -> tuple[float, list[tuple[int, catalog.IntArray]]]:
        """(θ ≥ 1 bounding y·a / price over every pattern of every column, improving patterns found)."""
        theta = 1.0
        found: list[tuple[int, catalog.IntArray]] = []
        for i in range(self.capacity.shape[0]):
            price = float(self.price[i])
            known = self.last_y[i]
            if known is not None:
                gain = np.maximum(y - known, 0.0)
                ub = self.last_ub[i] + _quick_bound(gain, self.req, self.most[:, i], self.fit[:, i], self.capacity[i])
                if ub <= price * (1 + IMPROVES):
                    theta = max(theta, ub / price)
                    continue
            ub, pattern = _price_column(
                y, self.req, self.most[:, i], self.fit[:, i], self.capacity[i], price, cells=self.cells
            )
            self.last_y[i], self.last_ub[i] = y.copy(), ub
            theta = max(theta, ub / price)
            if pattern is not None and float(y @ pattern) > price * (1 + IMPROVES):
                found.append((i, pattern))
        return theta, found


def _quick_bound(
    y: catalog.FloatArray, req: catalog.IntArray, most: catalog.IntArray, fit: catalog.BoolArray, cap: catalog.IntArray
) -> float:
    """No pattern is worth more than all its classes' pods, nor than the best value per unit of one resource allows."""
    items = fit & (y > 0) & (most > 0)
    if not items.any():
        return 0.0
    quick = float((y[items] * most[items]).sum())
    for r in range(req.shape[1]):
        w = req[items, r]
        if (w > 0).all():
            quick = min(quick, float(cap[r] * (y[items] / w).max()))
    return quick


def _price_column(
    y: catalog.FloatArray,
    req: catalog.IntArray,
    most: catalog.IntArray,
    fit: catalog.BoolArray,
    cap: catalog.IntArray,
    price: float,
    *,
    cells: int,
) -> tuple[float, catalog.IntArray | None]:
    """(an upper bound on y·a over every pattern a that fits `cap`, the best feasible pattern found or None)."""
    quick = _quick_bound(y, req, most, fit, cap)
    if quick <= price * (1 + IMPROVES):
        return quick, None
    bounded = np.where(fit & (y > 0), most, 0)
    value, pattern = _knapsack(y, req, bounded, cap, cells=GRID_CELLS)  # coarse first: often settles it
    if cells > GRID_CELLS and value > price * (1 + IMPROVES):
        value, pattern = _knapsack(y, req, bounded, cap, cells=cells)
    return min(quick, value), _repair(pattern, y, req, cap)


def _knapsack(
    y: catalog.FloatArray, req: catalog.IntArray, most: catalog.IntArray, cap: catalog.IntArray, *, cells: int
) -> tuple[float, catalog.IntArray]:
    """Bounded knapsack by DP over a grid: weights rounded down to each tracked resource's unit, capacity rounded
    down (a relaxation, so the value is an upper bound); resources no pattern can overfill are not tracked."""
    items = np.flatnonzero(most > 0)
    # A resource is tracked only when some pattern could overfill it: neither all the pods together nor as many of
    # its largest pods as any other resource admits fit over its capacity.
    count_caps = [int(cap[r]) // int(req[items, r].min()) for r in range(req.shape[1]) if (req[items, r] > 0).all()]
    dims = []
    for r in range(req.shape[1]):
        others = [n for q, n in enumerate(count_caps) if q != r]
        load = int(most[items] @ req[items, r])
        if others:
            load = min(load, min(others) * int(req[items, r].max()))
        if load > int(cap[r]):
            dims.append(r)
    unit = {r: int(np.gcd.reduce(req[items, r][req[items, r] > 0])) if (req[items, r] > 0).any() else 1 for r in dims}
    # The least binding resource (the most value its capacity alone would allow) is coarsened first.
    slack = {r: float(cap[r]) * float((y[items] / np.maximum(req[items, r], 1)).max()) for r in dims}
    while True:
        size = {r: int(cap[r]) // unit[r] + 1 for r in dims}
        if math.prod(size.values()) <= cells:
            break
        unit[max((r for r in dims if size[r] > 1), key=lambda r: slack[r])] *= 2
    dims = [r for r in dims if (req[items, r] // unit[r] > 0).any()]
    if not dims:  # every pod of every class fits at once
        return float(most @ y), most.copy()
    shape = tuple(int(cap[r]) // unit[r] + 1 for r in dims)
    table = np.zeros(shape)
    steps: list[tuple[int, int, tuple[int, ...], catalog.BoolArray]] = []  # (class, copies, weight, taken)
    for c in items:
        w = tuple(int(req[c, r]) // unit[r] for r in dims)
        left, chunk = int(most[c]), 1
        while left > 0:  # binary splitting of the class's copies: 1, 2, 4, ..., the rest
            m = min(chunk, left)
            left -= m
            chunk *= 2
            wm = tuple(m * wi for wi in w)
            if any(wi >= s for wi, s in zip(wm, shape, strict=True)):
                break
            cand = table[tuple(slice(0, s - wi) for wi, s in zip(wm, shape, strict=True))] + m * float(y[c])
            dst = table[tuple(slice(wi, None) for wi in wm)]
            taken = cand > dst
            np.maximum(dst, cand, out=dst)
            steps.append((int(c), m, wm, taken))
    state: list[int] = [s - 1 for s in shape]
    pattern = np.zeros(len(y), dtype=np.int64)
    for cls, m, wm, taken in reversed(steps):
        if (
            all(s >= wi for s, wi in zip(state, wm, strict=True))
            and taken[tuple(s - wi for s, wi in zip(state, wm, strict=True))]
        ):
            pattern[cls] += m
            state = [s - wi for s, wi in zip(state, wm, strict=True)]
    return float(table[tuple(s - 1 for s in shape)]), pattern


def _repair(
    pattern: catalog.IntArray, y: catalog.FloatArray, req: catalog.IntArray, cap: catalog.IntArray
) -> catalog.IntArray | None:
    """Drop the least valuable pods until the pattern truly fits (the grid relaxation may overfill)."""
    pattern = pattern.copy()
    while True:
        over = pattern @ req - cap
        if (over <= 0).all():
            return pattern if pattern.any() else None
        helps = (pattern > 0) & (req[:, over > 0] > 0).any(axis=1)
        if not helps.any():
            return None
        c = int(np.flatnonzero(helps)[np.argmin(y[helps])])
        pattern[c] -= 1
