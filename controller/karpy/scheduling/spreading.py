"""Placing a run whose only constraint is a topology spread over a domain key (zone, capacity type) pod by pod,
as `placement` does one at a time, but from counts and per-slot room instead of a full check and commit per pod
(see `Walk`). No I/O."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import board, catalog, claiming, nodes, pods, topology


def walkable(ctx: nodes.RunContext) -> topology.Group | None:
    """The run's only constraint when it is a topology spread over a key other than hostname (zone, capacity
    type) and nothing else ties placements together (no host ports; no anti-affinity, whose inverse groups would
    appear as pods land): such runs can go through `Walk`. None otherwise."""
    if len(ctx.constraints) != 1 or ctx.pod.host_ports or ctx.pod.anti_affinity:
        return None
    g = ctx.constraints[0]
    if g.key.kind is not topology.Kind.SPREAD or g.key.inverse or g.key.topology_key == labels.LABEL_HOSTNAME:
        return None
    return g


class Walk:
    """Places a spread run pod by pod, exactly as `placement` would one at a time (every candidate slot in order,
    then a new claim), without a full check and commit per pod.

    Why it is exact: a slot *pinned* to one domain d of the spread key takes the next pod iff d is allowed now
    (`count(d) + self - min <= maxSkew`, as `Group.next_domains` decides for a node whose only candidate is d) and
    the pod fits the slot otherwise, which does not depend on the counts: topology then adds nothing to the
    slot's requirements. That *static* check (`nodes.evaluate` without the constraint) answers once how many of
    the run's pods the slot can take (its room; filling a node one pod at a time or several at once ends in the
    same state), so while pods only land on pinned slots the walk just tracks counts and rooms and defers the
    commits; a slot whose static check refuses never takes a pod of this run. Slots that still allow several
    domains choose one from the counts, so before one is checked (or a claim is opened) the deferred pods are
    committed and the full check runs. Each pod goes to the lowest slot id that accepts it."""

    def __init__(
        self,
        b: board.Board,
        *,
        ctx: nodes.RunContext,
        group: topology.Group,
        run_pods: list[pods.Pod],
        candidates: catalog.IntArray,
        pod_domains: requirements.Requirement,
        limit: int,
        kill: Callable[[int], None],
    ) -> None:
        """`candidates`: slot ids that may take the run's pods, ascending; `pod_domains`: the domains the pod's own
        requirements allow for the group's key; `kill(slot_id)`: remember a slot refuses the run for good."""
        self.b, self.ctx, self.group, self.run_pods, self.limit, self.kill = b, ctx, group, run_pods, limit, kill
        self.static = dataclasses.replace(ctx, constraints=[])  # the check minus the spread constraint
        self.key = group.key.topology_key
        self.pod_domains = pod_domains
        self.selected = group in b.topology.selecting(ctx.pod)  # the run's own pods count in the group
        eligible = sorted(d for d in group.universe if pod_domains.has(d))  # as Group.min_count
        min_domains = group.key.min_domains
        self.eligible = [] if min_domains is not None and len(eligible) < min_domains else eligible
        self.placed = 0
        self.queues: dict[str, list[int]] = {}  # domain -> slot ids pinned to it, ascending
        self.heads: dict[str, int] = {}  # domain -> position of the first entry not yet known to refuse
        self.gone: set[int] = set()  # pinned slots that take no more pods of the run
        self.room: dict[int, int] = {}  # pinned slots known to accept: pods of the run they still take
        self.domain: dict[int, str] = {}
        self.counted: dict[int, bool] = {}  # does a pod landing there count in the group (Topology._count)?
        self.pending: dict[int, list[pods.Pod]] = {}  # deferred commits per slot, in pod order
        self.delta: dict[str, int] = {}  # deferred count increments per domain
        codes, names = b.table.pinned(self.key, candidates)
        self.open: list[int] = candidates[codes < 0].tolist()  # not pinned to one domain: full check
        for code in np.unique(codes[codes >= 0]).tolist():
            self.queues[names[code]] = candidates[codes == code].tolist()
            self.heads[names[code]] = 0

    def run(self) -> int | str:
        groups = len(self.b.topology.groups)
        while self.placed < self.limit:
            best = self._best_pinned()
            landed = self._try_open(before=best)
            if landed:
                if len(self.b.topology.groups) != groups:
                    break
                continue
            if best is not None:
                self._assign(best)
                continue
            self._flush()
            got = claiming.open_claims(self.b, self.ctx, limit=1, run_pods=self.run_pods[self.placed :], bulk=False)
            if isinstance(got, str):
                return self.placed if self.placed else got
            self.placed += got
            self._adopt(self.b.table.n - 1)
            if len(self.b.topology.groups) != groups:
                break
        self._flush()
        return self.placed

    # --- domains --------------------------------------------------------------------------------------------
    def _count(self, domain: str) -> int:
        return self.group.counts.get(domain, 0) + self.delta.get(domain, 0)

    def _allowed(self) -> list[str]:
        """Domains the next pod may land in (Group.next_domains on a node pinned to the domain)."""
        low = min(self._count(d) for d in self.eligible) if self.eligible else 0
        top = self.group.key.max_skew + low - (1 if self.selected else 0)
        return [d for d in self.queues if self._count(d) <= top and self.pod_domains.has(d)]

    # --- slots ----------------------------------------------------------------------------------------------
    def _enter(self, slot_id: int, domain: str | None) -> None:
        if domain is None:
            bisect.insort(self.open, slot_id)
            return
        queue = self.queues.setdefault(domain, [])
        at = bisect.bisect_left(queue, slot_id)
        queue.insert(at, slot_id)
        self.heads[domain] = min(self.heads.get(domain, at), at)

    def _adopt(self, slot_id: int) -> None:
        """A slot that just took a pod through the full check: it joins its (now single) domain's queue."""
        codes, names = self.b.table.pinned(self.key, np.array([slot_id]))
        self._enter(slot_id, names[int(codes[0])] if codes[0] >= 0 else None)

    def _head(self, domain: str) -> int | None:
        """The lowest slot pinned to `domain` that takes the next pod (checked statically on first sight)."""
        queue = self.queues[domain]
        i = self.heads[domain]
        while i < len(queue):
            slot_id = queue[i]
            if slot_id in self.room:
                break
            if slot_id not in self.gone:
                fit = nodes.evaluate(
                    self.b.slots[slot_id],
                    self.static,
                    self.b.topology,
                    limit=self.limit - self.placed,
                    min_values_policy=self.b.min_values_policy,
                )
                if isinstance(fit, nodes.Fit):
                    self._know(slot_id, domain, fit)
                    break
                self.b.table.tighten(slot_id)
                self.gone.add(slot_id)
            i += 1
        self.heads[domain] = i
        return queue[i] if i < len(queue) else None

    def _know(self, slot_id: int, domain: str, fit: nodes.Fit) -> None:
        self.room[slot_id] = fit.count
        self.domain[slot_id] = domain
        slot = self.b.slots[slot_id]
        self.counted[slot_id] = self.selected and self.group.node_counts(fit.requirements, slot.taints)

    def _best_pinned(self) -> int | None:
        best = None
        for domain in self._allowed():
            slot_id = self._head(domain)
            if slot_id is not None and (best is None or slot_id < best):
                best = slot_id
        return best

    def _assign(self, slot_id: int) -> None:
        """The next pod lands on a pinned slot known to accept it: deferred."""
        self.pending.setdefault(slot_id, []).append(self.run_pods[self.placed])
        self.placed += 1
        domain = self.domain[slot_id]
        if self.counted[slot_id]:
            self.delta[domain] = self.delta.get(domain, 0) + 1
        self.room[slot_id] -= 1
        if self.room[slot_id] == 0:
            del self.room[slot_id]
            self.gone.add(slot_id)

    def _try_open(self, *, before: int | None) -> bool:
        """Full checks of unpinned slots below `before`, in order (deferred pods committed first); True when
        one took the next pod."""
        for slot_id in list(self.open):
            if before is not None and slot_id > before:
                break
            self._flush()
            b = self.b
            fit = nodes.evaluate(b.slots[slot_id], self.ctx, b.topology, limit=1, min_values_policy=b.min_values_policy)
            if isinstance(fit, nodes.Fit):
                self.placed += b.commit(slot_id, fit, run_pods=self.run_pods[self.placed :], ctx=self.ctx)
                self.open.remove(slot_id)
                self._adopt(slot_id)
                return True
            b.table.tighten(slot_id)
            if fit.permanent:
                self.kill(slot_id)
                self.open.remove(slot_id)
            elif not b.table.fits(slot_id, self.ctx.request):
                self.open.remove(slot_id)
        return False

    def _flush(self) -> None:
        """Commit the deferred pods, slot by slot (one commit of n pods leaves a slot as n commits of one)."""
        b = self.b
        for slot_id in sorted(self.pending):
            landing = self.pending[slot_id]
            fit = nodes.evaluate(
                b.slots[slot_id], self.static, b.topology, limit=len(landing), min_values_policy=b.min_values_policy
            )
            assert isinstance(fit, nodes.Fit), "a known room must still hold"
            assert fit.count == len(landing), "a known room must still hold"
            b.commit(slot_id, fit, run_pods=landing, ctx=self.ctx)
        self.pending.clear()
        self.delta.clear()
