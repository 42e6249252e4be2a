"""What hostname rules force on the cost of new capacity: a lower bound that `bound.lower_bound` reports when it is
larger than the LP relaxation over the pods' requests alone.

An *exclusion group* is the pods that own one hostname-keyed rule and are selected by it, of which a node holds at
most `cap`: a required self-selecting anti-affinity term (cap 1: no two share a node) or a DoNotSchedule topology
spread (cap maxSkew: a new node's hostname domain starts empty and the minimum over hostnames is 0, so each owner
landed where the count stayed within maxSkew, and the last one counts all before it). Pods that may relax the rule
(several ORed node terms, a namespace selector) are left out, which only loosens the bound. Such a group needs nodes
of its own, each a type its pod fits, and everything else must fit in those nodes and any more bought (`bound`, an
LP over the columns of `bound.lower_bound`).
"""

from __future__ import annotations

import numpy as np

from karpy.api import labels
from karpy.scheduling import catalog, pods, topology
from karpy.scheduling.optimizer import lp

GROUPS = 1  # exclusion groups bounded (one small LP each), most nodes forced first
_RELATIVE_TOLERANCE = 1e-9


def groups_of(pod: pods.Pod) -> tuple[tuple[topology.GroupKey, int], ...]:
    """The hostname-keyed groups `pod` counts in, each with how many of its pods a node holds at most."""
    host = labels.LABEL_HOSTNAME
    out: list[tuple[topology.GroupKey, int]] = []
    if len(pod.required_node_terms) <= 1:
        node_reqs = pod.node_requirements()
        for c in pod.spread:
            if (
                c.topology_key == host
                and c.when_unsatisfiable == pods.SPREAD_DO_NOT_SCHEDULE
                and c.selector is not None
                and c.selector.admits(pod.labels)
            ):
                out.append((topology.spread_key(pod, c, node_reqs), c.max_skew))
    for t in pod.anti_affinity:
        if (
            t.topology_key == host
            and t.selector is not None
            and t.namespace_selector is None
            and pod.namespace in t.namespaces
            and t.selector.admits(pod.labels)
        ):
            out.append((topology.affinity_key(t, topology.Kind.ANTI_AFFINITY), 1))
    return tuple(out)


class Exclusions:
    """Pseudo-resource columns for the groups of `groups_of`, numbered as first met; cached per pod template."""

    def __init__(self) -> None:
        self.column: dict[topology.GroupKey, int] = {}
        self.caps: list[int] = []
        self._seen: dict[tuple[str, int, int, int, int, int, int], tuple[int, ...]] = {}

    def of(self, pod: pods.Pod) -> tuple[int, ...]:
        """The columns the pod takes one unit of (one per group it counts in)."""
        # what `groups_of` reads of a pod, by the identity of the parts pods of one template share (`pods.Interner`;
        # the pods outlive this object, so no id is reused meanwhile); the interner leaves empty maps unshared, and
        # every pod without a node selector has one
        key = (
            pod.namespace,
            id(pod.spread),
            id(pod.anti_affinity),
            id(pod.labels),
            id(pod.node_selector) if pod.node_selector else 0,
            id(pod.required_node_terms),
            id(pod.tolerations),
        )
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = tuple(self._column(g, cap) for g, cap in groups_of(pod))
        return found

    def _column(self, group: topology.GroupKey, cap: int) -> int:
        found = self.column.get(group)
        if found is None:
            found = self.column[group] = len(self.caps)
            self.caps.append(cap)
        return found


class Fronts:
    """The columns worth a place in the exclusion LPs, computed once per solve: whole-node fronts per requirement
    group (what a node holding one group pod need be) and the per-dollar front (what extra nodes need be)."""

    def __init__(self, *, loose: catalog.BoolArray, capacity: catalog.FloatArray, price: catalog.FloatArray) -> None:
        self.loose, self.capacity, self.price = loose, capacity, price
        self._whole: dict[bytes, catalog.IntArray] = {}
        self.extra = _per_dollar_front(capacity, price)

    def whole(self, cls: int) -> catalog.IntArray:
        """The whole-node front of `cls`'s requirement group: a column a kept one dominates is no larger, so a pod
        fitting it fits the kept one too."""
        key = self.loose[cls].tobytes()
        found = self._whole.get(key)
        if found is None:
            found = self._whole[key] = _whole_node_front(np.flatnonzero(self.loose[cls]), self.capacity, self.price)
        return found


def bound(hosted: list[tuple[int, int]], cap: int, *, compat: catalog.BoolArray, fronts: Fronts) -> float:
    """A lower bound from one exclusion group: its pods (`hosted`: class index, pods) need nodes that hold at most
    `cap` of them, each a column the pod fits; those nodes' capacity, plus whatever else is bought, must cover the
    whole demand (every class, per resource, summed over nodes: a relaxation of packing; `fronts.capacity` is
    scaled to a demand of 1 per resource).

    LP: z[c, k] ≥ 0 group pods of class c on nodes of column k, x[k] ≥ 0 further nodes. Minimise
    Σ price_k·(Σ_c z[c, k] / cap + x[k]) subject to Σ_k z[c, k] = n_c and, per resource r,
    Σ_k capacity[k, r]·(Σ_c z[c, k] / cap + x[k]) ≥ demand_r. Any plan is a feasible point (its nodes holding group
    pods give z, the rest x), so the optimum bounds its cost. Columns a cheaper-or-equal column beats in every
    resource are dropped for z (whole nodes), per dollar for x (fractional nodes), neither changing the optimum."""
    cap_used, price = fronts.capacity, fronts.price
    n_res = cap_used.shape[1]
    z_cols: list[catalog.IntArray] = []
    for c, _ in hosted:
        front = fronts.whole(c)
        cols = front[compat[c][front]]
        if not len(cols):
            return 0.0  # some group pod fits no column: leave it to the other bound
        z_cols.append(cols)
    x_cols = fronts.extra
    n_z = sum(len(cols) for cols in z_cols)
    all_cols = np.concatenate([*z_cols, x_cols])
    weight = np.concatenate([np.full(n_z, 1.0 / cap), np.ones(len(x_cols))])
    cost = price[all_cols] * weight
    # capacity rows (as ≤): −Σ capacity·weight·var ≤ −1 (demand scaled to 1)
    rows = np.repeat(np.arange(n_res)[None, :], len(all_cols), axis=0).ravel()
    vars_ = np.repeat(np.arange(len(all_cols)), n_res)
    vals = -(cap_used[all_cols] * weight[:, None]).ravel()
    a_ub = lp.Triplets(rows, vars_, vals, (n_res, len(all_cols)))
    eq_rows = np.concatenate([np.full(len(cols), i) for i, cols in enumerate(z_cols)])
    a_eq = lp.Triplets(eq_rows, np.arange(n_z), np.ones(n_z), (len(hosted), len(all_cols)))
    res = lp.minimize(cost, (a_ub, -np.ones(n_res)), (a_eq, np.array([float(n) for _, n in hosted])))
    return res.cost * (1 - _RELATIVE_TOLERANCE) if res is not None else 0.0


def _whole_node_front(
    cols: catalog.IntArray, capacity: catalog.FloatArray, price: catalog.FloatArray
) -> catalog.IntArray:
    """The columns among `cols` that no cheaper-or-equal column matches in every resource (ties keep the first):
    the only ones a node holding one group pod need be (a plan's node of a dropped column could be the dominating
    one at no greater cost)."""
    return _front(capacity, cols[np.lexsort((cols, price[cols]))])


def _per_dollar_front(capacity: catalog.FloatArray, price: catalog.FloatArray) -> catalog.IntArray:
    """Columns no other column matches in every resource per dollar (ties keep the first): the only ones
    fractional extra nodes need be. A dominating column has the larger sum, so it comes first in that order."""
    per = capacity / np.maximum(price, 1e-300)[:, None]
    return _front(per, np.lexsort((np.arange(len(price)), -per.sum(axis=1))))


def _front(values: catalog.FloatArray, order: catalog.IntArray) -> catalog.IntArray:
    """The rows of `order` (indices into `values`) that no earlier row matches or beats in every column, block by
    block against the front kept so far and within the block. Rows equal to an earlier one go first (one type's
    offerings in several zones share a capacity): they are beaten anyway, and are most of the rows."""
    rows = np.ascontiguousarray(values[order])
    _, first = np.unique(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))), return_index=True)
    order = order[np.sort(first)]
    kept = np.zeros((0, values.shape[1]))
    out: list[catalog.IntArray] = [np.zeros(0, np.int64)]
    for start in range(0, len(order), 256):
        block = order[start : start + 256]
        vals = values[block]
        beaten: catalog.BoolArray = np.zeros(len(block), np.bool_)
        if len(kept):
            beaten |= np.any(np.all(kept[None, :, :] >= vals[:, None, :], axis=2), axis=1)
        inner = np.all(vals[None, :, :] >= vals[:, None, :], axis=2) & np.tri(len(block), k=-1, dtype=np.bool_)
        beaten |= np.any(inner, axis=1)
        out.append(block[~beaten])
        kept = np.concatenate([kept, vals[~beaten]])
    return np.concatenate(out)
