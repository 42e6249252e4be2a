"""A fractional lower bound on the hourly cost of the new capacity a solve planned.

Formulation (LP relaxation, solved with HiGHS through scipy.optimize.linprog, imported lazily):
pods on planned claims are grouped into *classes* by the set of instance types (pool, type) they may use — the
options their claim started from. Variables: x_t ≥ 0, fractional nodes of type t; y_{c,t} ≥ 0, the share of class
c's demand placed on type t. Minimise Σ_t price_t·x_t subject to Σ_t y_{c,t} = 1 for every class and, for every
type t and resource r (cpu, memory, pods, extended), Σ_c y_{c,t}·demand_{c,r} ≤ (allocatable_{t,r} −
daemon_{t,r})·x_t. Any integral packing is a feasible point, so the optimum bounds the cost from below; topology
and per-node indivisibility are ignored, which is why it is only tight for unconstrained mixes.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from karpy.scheduling import catalog

if TYPE_CHECKING:
    from karpy.scheduling import nodes


def lower_bound(claims: Sequence[nodes.Slot], index: catalog.ResourceIndex) -> float:
    from scipy.optimize import linprog  # lazy: scipy is heavy and only needed for the bound

    demand: dict[tuple[str, bytes], catalog.IntArray] = collections.defaultdict(
        lambda: np.zeros(len(index.names), np.int64)
    )
    pools: dict[str, catalog.PoolCatalog] = {}
    for slot in claims:
        assert slot.pool is not None
        pools[slot.pool.name] = slot.pool
        compatible = slot.pool.mask(slot.requirements.without("kubernetes.io/hostname"))
        demand[(slot.pool.name, compatible.tobytes())] += slot.used
    columns = [(name, t) for name, pool in pools.items() for t in range(len(pool.types))]
    col_of = {c: i for i, c in enumerate(columns)}
    n_x = len(columns)
    classes = list(demand.items())
    y_vars = [
        (ci, col_of[(name, int(t))])
        for ci, ((name, mask), _) in enumerate(classes)
        for t in np.flatnonzero(np.frombuffer(mask, dtype=np.bool_))
    ]
    if not y_vars:
        return 0.0
    prices = np.array([pools[n].offerings(pools[n].requirements)[1][t] for n, t in columns])
    prices = np.where(np.isfinite(prices), prices, 1e9)
    n_vars = n_x + len(y_vars)
    cost = np.concatenate([prices, np.zeros(len(y_vars))])
    rows, cols, vals = [], [], []
    n_res = len(index.names)
    for j, (name, t) in enumerate(columns):
        usable = pools[name].usable[t]
        for r in range(n_res):
            rows.append(j * n_res + r)
            cols.append(j)
            vals.append(-float(max(usable[r], 0)) / 1000.0)
    for v, (ci, j) in enumerate(y_vars):
        d = classes[ci][1]
        for rr in np.flatnonzero(d):
            rows.append(j * n_res + int(rr))
            cols.append(n_x + v)
            vals.append(float(d[rr]) / 1000.0)
    from scipy.sparse import coo_matrix

    a_ub = coo_matrix((vals, (rows, cols)), shape=(n_x * n_res, n_vars)).tocsr()
    eq_rows = [ci for ci, _ in y_vars]
    a_eq = coo_matrix(
        ([1.0] * len(y_vars), (eq_rows, [n_x + v for v in range(len(y_vars))])), shape=(len(classes), n_vars)
    ).tocsr()
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(n_x * n_res),
        A_eq=a_eq,
        b_eq=np.ones(len(classes)),
        bounds=(0, None),
        method="highs",
    )
    return float(res.fun) if res.status == 0 else 0.0
