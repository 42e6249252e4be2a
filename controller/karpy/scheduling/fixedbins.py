"""Claims the repack may not dissolve: which pods are tied to their claim, and filling the room they leave.

A pod is *tied* to its claim when moving it could break a rule kube-scheduler checks per node: it has host ports,
owns a hostname-keyed term (spread, affinity or anti-affinity, required or preferred), or is selected by a
hostname-keyed pod-affinity group (an owner may rely on it being there). Every other pod may move to another claim
of its pool whose requirements are its claim's own (zone, capacity type and every other key stay as they were, so
no count of a non-hostname domain changes), with one restriction: it may not join a claim where a tied pod owns a
hostname-keyed spread or anti-affinity term selecting it (the owner's count, or its exclusion, would then break).

A claim with tied pods is a *fixed bin*: it keeps its tied pods, its hostname and its requirements; the pods that
may move leave it, and movable pods fill the room left on the bin's cheapest option (so the bin costs no more). A
bin whose requirements are looser than a movable pod's (say no zone yet, the pod's claim pinned to one) may take
the pod and narrow to its requirements when no kept pod counts in, or owns, a rule keyed on anything but hostname
(so narrowing moves no count) and its cheapest option is as cheap under the narrower requirements.
Pure numpy and Python; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import catalog, nodes, pods, topology

Term = tuple[requirements.Requirements | None, frozenset[str], requirements.Requirements | None]
"""(label selector, namespaces, namespace selector) of a hostname-keyed term a tied pod owns."""


class Ties:
    """Which pods are tied to their claim, and which hostname-keyed terms a pod owns (see the module docstring)."""

    def __init__(self, topo: topology.Topology) -> None:
        self.namespace_labels = topo.namespace_labels
        host = labels.LABEL_HOSTNAME
        self._affinity = [
            g
            for g in topo.groups.values()
            if g.key.topology_key == host and g.key.kind is topology.Kind.AFFINITY and not g.key.inverse
        ]
        self._domain_groups = [g for g in topo.groups.values() if g.key.topology_key != host]
        self._selected: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
        self._counted: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
        # Pods stamped from one template share their parts (`pods.Interner`): cache per those parts' identities.
        # The pods outlive the repack that holds this object, so no id is reused meanwhile.
        self._tied: dict[tuple[int, ...], bool] = {}
        self._tied_pod: dict[int, bool] = {}  # asked again of a fixed bin's pods
        self._terms: dict[tuple[int, ...], list[Term]] = {}

    @staticmethod
    def _template(pod: pods.Pod) -> tuple[int, ...]:
        return (
            id(pod.spread),
            id(pod.affinity),
            id(pod.anti_affinity),
            id(pod.preferred_affinity),
            id(pod.preferred_anti_affinity),
            id(pod.host_ports),
            id(pod.labels),
            id(pod.namespace),
        )

    def tied(self, pod: pods.Pod) -> bool:
        found = self._tied_pod.get(id(pod))
        if found is None:
            key = self._template(pod)
            found = self._tied.get(key)
            if found is None:
                found = self._tied[key] = self._is_tied(pod)
            self._tied_pod[id(pod)] = found
        return found

    def _is_tied(self, pod: pods.Pod) -> bool:
        if pod.host_ports or self.terms(pod):
            return True
        host = labels.LABEL_HOSTNAME
        if any(t.topology_key == host for t in (*pod.affinity, *(w.term for w in pod.preferred_affinity))):
            return True
        return self.selected_by_affinity(pod)

    def relies_on_company(self, pod: pods.Pod) -> bool:
        """Does `pod` own, or is it selected by, a hostname-keyed pod affinity (it may not leave its company)?"""
        host = labels.LABEL_HOSTNAME
        if any(t.topology_key == host for t in (*pod.affinity, *(w.term for w in pod.preferred_affinity))):
            return True
        return self.selected_by_affinity(pod)

    def selected_by_affinity(self, pod: pods.Pod) -> bool:
        """Is `pod` selected by a hostname-keyed pod-affinity group (an owner may rely on it being there)?"""
        if not self._affinity:
            return False
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = any(g.selects(pod, self.namespace_labels) for g in self._affinity)
        return found

    def pinned_by_domains(self, pod: pods.Pod) -> bool:
        """Does `pod` own, or count in, a rule keyed on something other than hostname?"""
        host = labels.LABEL_HOSTNAME
        owned = [
            *(c.topology_key for c in pod.spread),
            *(t.topology_key for t in (*pod.affinity, *pod.anti_affinity)),
            *(w.term.topology_key for w in (*pod.preferred_affinity, *pod.preferred_anti_affinity)),
        ]
        if any(k != host for k in owned):
            return True
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._counted.get(key)
        if found is None:
            found = self._counted[key] = any(g.selects(pod, self.namespace_labels) for g in self._domain_groups)
        return found

    def terms(self, pod: pods.Pod) -> list[Term]:
        """The hostname-keyed spread and anti-affinity terms `pod` owns (its node may not take pods they select)."""
        key = self._template(pod)
        found = self._terms.get(key)
        if found is None:
            found = self._terms[key] = self._own_terms(pod)
        return found

    @staticmethod
    def _own_terms(pod: pods.Pod) -> list[Term]:
        host = labels.LABEL_HOSTNAME
        out: list[Term] = [(c.selector, frozenset({pod.namespace}), None) for c in pod.spread if c.topology_key == host]
        anti = (*pod.anti_affinity, *(w.term for w in pod.preferred_anti_affinity))
        out += [(t.selector, t.namespaces, t.namespace_selector) for t in anti if t.topology_key == host]
        return out

    def selects(self, term: Term, pod: pods.Pod) -> bool:
        selector, namespaces, namespace_selector = term
        if selector is None:
            return False
        in_namespace = pod.namespace in namespaces
        if not in_namespace and namespace_selector is not None:
            ns_labels = self.namespace_labels.get(pod.namespace, {pods.LABEL_NAMESPACE_NAME: pod.namespace})
            in_namespace = namespace_selector.admits(ns_labels)
        return in_namespace and selector.admits(pod.labels)


@dataclass(slots=True)
class Bin:
    """A fixed bin: the claim, the pods that stay, the room its cheapest option leaves, and the group (index into
    the pool's requirement groups) whose requirements it has now (`home` until it narrows)."""

    claim: nodes.Slot
    kept: list[pods.Pod]
    used: catalog.IntArray  # what its pods use (the kept ones, then those `fill` adds)
    room: catalog.IntArray  # usable of the cheapest option holding `kept`, less `used`
    terms: list[Term]
    home: int
    group: int
    narrowable: bool
    type_id: int
    price: float
    added: list[pods.Pod]


def bins(
    fixed: Sequence[nodes.Slot],
    ties: Ties,
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
            [t for p in k for t in ties.terms(p)],
            group,
            group,
            not any(ties.pinned_by_domains(p) for p in k),
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
    ties: Ties,
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
            if worth and not any(ties.relies_on_company(p) for p in kept[i]):
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
    ties: Ties,
    *,
    index: catalog.ResourceIndex,
    narrows: catalog.BoolArray,
    prices: Sequence[catalog.FloatArray],
) -> list[list[pods.Pod]]:
    """Place movable pods (per requirement group, in hand-out order) in the bins' room: larger shapes first, each
    first fit over the bins in order, a bin taking a pod of its own group or (narrowable, not narrowed yet,
    `narrows[home, group]`, its cheapest option as cheap there) of a narrower one, never where a bin's term selects
    the pod. Returns, per group, the pods left."""
    if not found:
        return [list(m) for m in movable_by_group]
    room = np.array([b.room for b in found], dtype=np.int64)
    group = np.array([b.group for b in found], dtype=np.int64)
    home = group.copy()
    narrowable = np.array([b.narrowable for b in found], dtype=np.bool_)
    type_id = np.array([b.type_id for b in found], dtype=np.int64)
    price = np.array([b.price for b in found], dtype=np.float64)
    # bins share few distinct term sets (a deployment's pods own equal terms): decide admission per set, and treat
    # pods of one group with equal requests that the same sets admit as one class
    term_sets: dict[tuple[Term, ...], int] = {}
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

    most = room.max(axis=0)  # per resource, the most any bin has left (only falls): skip what no bin can take
    may_narrow = {  # per target group: bins that could narrow to it (if they have not narrowed yet)
        g: narrowable & narrows[home, g] & (prices[g][type_id] <= price * (1 + 1e-12))
        for g, m in enumerate(movable_by_group)
        if m
    }
    # per group, the bins that may ever take its pods (in order: its own, and those that could narrow to it), with
    # what of them never changes: whether each may narrow to the group, its home, its term set
    candidates = {}
    for g, m in may_narrow.items():
        at_bins = np.flatnonzero((home == g) | m)
        candidates[g] = (at_bins, m[at_bins], home[at_bins], term_set[at_bins])
    left: list[list[pods.Pod]] = [[] for _ in movable_by_group]
    for i in sorted(range(len(classes)), key=size):
        (cls_group, _, admits), members = classes[i]
        req = index.vector(members[0].requests)
        if (req > most).any():
            left[cls_group] += members
            continue
        need = np.flatnonzero(req > 0)  # never empty: every pod asks for a pods slot
        at_bins, narrowing_to, at_home, at_set = candidates[cls_group]
        now = group[at_bins]
        ok = (now == cls_group) | (narrowing_to & (now == at_home))
        ok &= np.frombuffer(admits, dtype=np.bool_)[at_set]
        fits = np.where(ok, np.maximum((room[at_bins][:, need] // req[need][None, :]).min(axis=1), 0), 0)
        before = np.cumsum(fits) - fits
        take = np.clip(len(members) - before, 0, fits)
        taking = np.flatnonzero(take)
        chosen = at_bins[taking]
        room[chosen] -= take[taking][:, None] * req[None, :]
        group[chosen] = cls_group
        at = 0
        for b_id, n in zip(chosen.tolist(), take[taking].tolist(), strict=True):
            found[b_id].added.extend(members[at : at + n])
            found[b_id].group = cls_group
            at += n
        left[cls_group] += members[at:]
        if at:
            most = room.max(axis=0)
    for b, now_room in zip(found, room, strict=True):
        if b.added:
            b.used, b.room = b.used + (b.room - now_room), now_room
    return left


def narrowing(groups: Sequence[requirements.Requirements]) -> catalog.BoolArray:
    """[a, b]: group b's requirements are group a's narrowed (a bin of a may take b's pods and become b)."""
    n = len(groups)
    out = np.zeros((n, n), dtype=np.bool_)
    for a in range(n):
        for b in range(n):
            out[a, b] = a == b or groups[a].intersect(groups[b]) == groups[b]
    return out
