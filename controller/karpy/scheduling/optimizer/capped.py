"""Re-pack pods that only per-node caps tie down (`tying.Traits.capped`) onto fresh nodes of their claims'
requirements.

Such a pod owns hostname rules that say how many pods a node may hold, and nothing else: a required self-selecting
anti-affinity (at most one pod the term selects on its node) or a DoNotSchedule hostname spread (at most maxSkew: a
new node's hostname domain starts empty and the minimum over hostnames is 0; scheduling/topologygroup.go). First-fit
opens a claim per pod, or puts one pod of each group on a claim sized to them all; split apart (`fixedbins`), a
lone pod often leaves most of a small node empty. Here the pods are packed afresh, several groups per node: a node
may hold a pod when, for every group owning a pod there (the pod included), the pods its term selects stay within
the cap.

How: the pods' request shapes are packed by `packing` (pattern LP, rounding) on the group's types with room for at
most as many pods as the caps allow together (so the patterns are ones the caps can fill), then each node's slots
are handed pods of their shape from the class (shape, rules owned, rules selecting it) with the most pods left that
the caps admit; a slot none admits stays empty, and the room it leaves on the pattern's type goes to the admitted
pods that fill it best. What no node took goes to the next round; after `_ROUNDS`, what is left gets a node each
(always allowed: a lone pod is within every cap). Each node then buys the cheapest type that holds it (the caller).
Pure numpy and Python; no I/O.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np

from karpy.scheduling import catalog, pods, topology
from karpy.scheduling.optimizer import bound, packing, tying

_ROUNDS = 2  # plans per pack: the second takes what slots the caps refused left (a third gains ~0.03%)
_PATTERN_PODS = 2000  # up to this many pods, the pattern LP's plan too (bench/scheduling.py: ~0.25 s at 4,600)


def pack(
    members: Sequence[pods.Pod], ties: tying.Ties, *, index: catalog.ResourceIndex, cand: packing.Types
) -> list[tuple[list[pods.Pod], catalog.IntArray]] | None:
    """Nodes (pods, their summed requests) holding every pod of `members` (all capped), within the caps; None when
    some pod fits no type of `cand`."""
    caps: dict[topology.GroupKey, int] = {}
    for p in members:
        caps.update(ties.of(p).capped)
    rules = list(caps)
    cap = np.array([caps[r] for r in rules], dtype=np.int64)
    vectors: dict[int, catalog.IntArray] = {}  # id(requests) -> vector: pods of a template share their requests
    selected: dict[tuple[str, int], tuple[int, ...]] = {}  # (namespace, id(labels)) -> rules selecting it
    position = {r: i for i, r in enumerate(rules)}
    # class: (shape, rules it owns, rules selecting it) -> its pods; pods of one class are interchangeable here
    classes: dict[tuple[bytes, tuple[int, ...], tuple[int, ...]], list[pods.Pod]] = collections.defaultdict(list)
    shape_of: dict[bytes, catalog.IntArray] = {}
    for p in members:
        vec = vectors.get(id(p.requests))
        if vec is None:
            vec = vectors[id(p.requests)] = index.vector(p.requests)
        sel = selected.get((p.namespace, id(p.labels)))
        if sel is None:
            sel = selected[(p.namespace, id(p.labels))] = tuple(i for i, r in enumerate(rules) if selects(r, p))
        owned = tuple(sorted(position[r] for r, _ in ties.of(p).capped))
        shape = vec.tobytes()
        shape_of.setdefault(shape, vec)
        classes[(shape, owned, sel)].append(p)
    keys = list(classes)
    req = np.array([shape_of[k[0]] for k in keys], dtype=np.int64).reshape(len(keys), -1)

    def plan(pattern_shapes: int) -> list[tuple[list[pods.Pod], catalog.IntArray]] | None:
        table = _Table(
            [list(reversed(classes[k])) for k in keys],  # handed out from the end: first pods first
            req=req,
            owns=[k[1] for k in keys],
            selected=[k[2] for k in keys],
            cap=cap,
        )
        return _rounds(table, cand, pattern_shapes=pattern_shapes)

    # The per-resource LP's plan is cheap; the pattern LP's is often cheaper (1-2%) but costs seconds' fractions
    # per thousand pods: both when few pods, the cheaper kept.
    made = plan(0)
    if made is not None and len(members) <= _PATTERN_PODS:
        other = plan(bound.PATTERN_CLASSES)
        if other is not None and _cost(other, cand) < _cost(made, cand):
            made = other
    return made


def _rounds(
    table: _Table, cand: packing.Types, *, pattern_shapes: int
) -> list[tuple[list[pods.Pod], catalog.IntArray]] | None:
    """Nodes for the table's pods: `_ROUNDS` plans of `packing` (patterns of up to `pattern_shapes` shapes, else by
    the per-resource LP) handed out within the caps, then a node for each pod left."""
    cap = np.array(table.cap, dtype=np.int64)
    out: list[tuple[list[pods.Pod], catalog.IntArray]] = []
    for _ in range(_ROUNDS):
        left = np.array(table.left, dtype=np.int64)
        if not left.any():
            return out
        shapes, of_class = np.unique(table.req[left > 0], axis=0, return_inverse=True)
        counts = np.bincount(of_class.ravel(), weights=left[left > 0], minlength=len(shapes)).astype(np.int64)
        by_shape: list[list[int]] = [[] for _ in shapes]
        for c, s in zip(np.flatnonzero(left).tolist(), of_class.ravel().tolist(), strict=True):
            by_shape[s].append(c)
        owners = {r for c in np.flatnonzero(left).tolist() for r in table.owns[c]}
        most = int(sum(cap[r] for r in owners)) or 1
        # no node holds more than `most` pods, so none uses more than `most` of the largest request: room beyond
        # that is never used, and types alike up to it collapse into the cheapest one (fewer columns to price)
        types = packing.collapsed(cand, np.minimum(cand.usable, most * shapes.max(axis=0)[None, :]))
        usable = types.usable
        # no whole-pattern re-plan of the rounded tail: here every type is small (few pods), so it would price
        # every column again for the same plan (bench/scheduling.py, 1,000 pods: 0.3 s more, same cost)
        plan = packing.pack(shapes, counts, types, replan_pods=0, pattern_shapes=pattern_shapes)
        if plan is None:
            return None
        least = shapes.min(axis=0)  # a node with less room than this in some resource takes no more pods
        for pattern, reps in plan:
            used = pattern @ shapes
            holds = types.anchor & (usable >= used[None, :]).all(axis=1)
            room = usable[int(np.argmin(np.where(holds, types.price, np.inf)))]
            slots = [(by_shape[s], int(pattern[s])) for s in np.flatnonzero(pattern).tolist()]
            top_up = not (room - used < least).any()
            while reps > 0:
                node = table.fill(slots, room, top_up=top_up)
                if node is None:
                    break
                copies = table.repeat(node[0], limit=reps - 1)  # the same classes again, while pods are left
                out += [node, *((placed, node[1].copy()) for placed in copies)]
                reps -= 1 + len(copies)
    out += table.alone()
    return out


def _cost(nodes: list[tuple[list[pods.Pod], catalog.IntArray]], cand: packing.Types) -> float:
    """$/h of `nodes`, each on the cheapest type of `cand` that holds it (what the caller's claims will cost)."""
    used = np.array([u for _, u in nodes], dtype=np.int64).reshape(len(nodes), -1)
    holds = (cand.usable[None, :, :] >= used[:, None, :]).all(axis=2) & cand.anchor[None, :]
    return float(np.where(holds, cand.price[None, :], np.inf).min(axis=1).sum())


class _Table:
    """The classes of pods (one request shape, the rules each owns and those selecting it), their pods left, and how
    nodes take them within the caps."""

    def __init__(
        self,
        queues: list[list[pods.Pod]],
        *,
        req: catalog.IntArray,
        owns: list[tuple[int, ...]],
        selected: list[tuple[int, ...]],
        cap: catalog.IntArray,
    ) -> None:
        self.queues, self.req, self.owns, self.selected = queues, req, owns, selected
        self.cap = cap.tolist()
        self.left = [len(q) for q in queues]
        self._class_of = {id(p): c for c, q in enumerate(queues) for p in q}  # the pods outlive this object
        n = len(cap)
        self._owns = np.array([[r in o for r in range(n)] for o in owns], dtype=np.bool_).reshape(len(owns), n)
        self._selected = np.array([[r in s for r in range(n)] for s in selected], dtype=np.bool_).reshape(
            len(selected), n
        )

    def fill(
        self, slots: list[tuple[list[int], int]], room: catalog.IntArray, *, top_up: bool
    ) -> tuple[list[pods.Pod], catalog.IntArray] | None:
        """One node: first the pattern's `slots` (the classes of a shape, how many pods of it), each from the
        admitted class with the most pods left; then, with `top_up`, while `room` (the usable of the type the pattern
        was meant for) has space, the admitted pod that best fills it. A class is admitted when, for every rule it
        counts in whose group has an owner on the node (it included), the pods the rule selects stay within the
        cap. None when no pod was taken."""
        owned = [0] * len(self.cap)
        counted = [0] * len(self.cap)
        taken: list[int] = []
        left, cap = self.left, self.cap
        for classes, count in slots:
            for _ in range(count):
                best, most = -1, 0
                for c in classes:
                    if left[c] > most and all(
                        counted[r] < cap[r] or (owned[r] == 0 and r not in self.owns[c]) for r in self.selected[c]
                    ):
                        best, most = c, left[c]
                if best < 0:
                    break
                self._take(best, owned, counted, taken)
        used = self.req[taken].sum(axis=0) if taken else np.zeros_like(room)
        top_up = top_up or len(taken) < sum(count for _, count in slots)  # room a slot left empty may serve
        while top_up:
            free = room - used
            full = np.array(counted) >= self.cap
            blocked = (self._selected & full[None, :] & ((np.array(owned) > 0)[None, :] | self._owns)).any(axis=1)
            ok = (np.array(left) > 0) & ~blocked & (self.req <= free[None, :]).all(axis=1)
            if not ok.any():
                break
            weight = np.where(room > 0, 1.0 / np.maximum(room, 1), 0.0)
            c = int(np.argmax(np.where(ok, (self.req * weight) @ (free * weight), -np.inf)))
            self._take(c, owned, counted, taken)
            used = used + self.req[c]
        if not taken:
            return None
        return [self.queues[c].pop() for c in taken], used

    def repeat(self, placed: list[pods.Pod], *, limit: int) -> list[list[pods.Pod]]:
        """Up to `limit` more nodes holding pods of the same classes as the node just filled (`placed`, its pods in
        the order taken): as many as every class has pods left for."""
        per_class = collections.Counter(self._class_of[id(p)] for p in placed)
        copies = min([limit, *(self.left[c] // n for c, n in per_class.items())])
        out = []
        for _ in range(copies):
            out.append([self.queues[self._class_of[id(p)]].pop() for p in placed])
        for c, n in per_class.items():
            self.left[c] -= n * copies
        return out

    def _take(self, c: int, owned: list[int], counted: list[int], taken: list[int]) -> None:
        for r in self.owns[c]:
            owned[r] += 1
        for r in self.selected[c]:
            counted[r] += 1
        self.left[c] -= 1
        taken.append(c)

    def alone(self) -> list[tuple[list[pods.Pod], catalog.IntArray]]:
        """A node for each pod left (within every cap: a lone pod counts only itself)."""
        out = []
        for c, q in enumerate(self.queues):
            while q:
                out.append(([q.pop()], self.req[c].copy()))
            self.left[c] = 0
        return out


def selects(rule: topology.GroupKey, pod: pods.Pod) -> bool:
    """Does the rule's term select `pod` (its selector, in its namespaces: cap rules have no namespace selector)?"""
    return rule.selector is not None and pod.namespace in rule.namespaces and rule.selector.admits(pod.labels)
