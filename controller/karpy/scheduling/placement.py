"""Placing a run (pods with equal signatures) on a `board.Board` at one relaxation step: existing slots first, in
order, through the `slots.SlotTable` pre-filter, then new claims (`claiming`).

*Bulk-safe* runs place several pods per slot in one pass; other runs go one pod at a time over a resource
pre-filter computed once per run, re-applying only the domain filter per pod (see `scheduler` for why both give
the reference placements). No I/O."""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from karpy.api import labels
from karpy.scheduling import board, catalog, claiming, nodes, pods, preferences, requirements, topology, volumes

_CHUNK = 256  # candidates masked at a time when placing pods one by one


@dataclass(slots=True)
class Run:
    pods: list[pods.Pod]
    dead: dict[tuple[object, ...], catalog.BoolArray] = field(default_factory=dict)  # state -> refused for good
    contexts: dict[tuple[object, ...], tuple[int, nodes.RunContext | str]] = field(default_factory=dict)
    failed_at: int = -1
    reason: str = ""


def place(b: board.Board, run: Run, *, view: preferences.View, limit: int) -> int | str:
    """Place up to `limit` pods of the run (one unless the run is bulk-safe); a reason when none fits."""
    ctx = _context(b, run, view)
    if isinstance(ctx, str):
        return ctx
    state = view.state()
    bulk = limit > 1 and _bulk_safe(b, ctx)
    if limit > 1 and not bulk:
        group = _domain_spread(ctx)
        if group is not None:
            return _SpreadWalk(b, run, ctx=ctx, state=state, group=group, limit=limit).run()
        return _one_by_one(b, run, ctx=ctx, state=state, limit=limit)
    placed = 0
    for slot_id in _candidates(b, run, ctx=ctx, state=state).tolist():
        fit = nodes.evaluate(
            b.slots[slot_id],
            ctx,
            b.topology,
            limit=limit - placed,
            min_values_policy=b.min_values_policy,
        )
        if isinstance(fit, nodes.Fit):
            placed += b.commit(slot_id, fit, run_pods=run.pods[placed:], ctx=ctx)
            if placed == limit:
                return placed
        else:
            b.table.tighten(slot_id)  # it passed the headroom filter yet refused: sharpen the bound
            if fit.permanent:
                _kill(run, state, slot_id=slot_id)
    while placed < limit:
        got = claiming.open_claims(b, ctx, limit=limit - placed, run_pods=run.pods[placed:], bulk=bulk)
        if isinstance(got, str):
            return placed if placed else got
        placed += got
    return placed


# --- context --------------------------------------------------------------------------------------------------
def _context(b: board.Board, run: Run, view: preferences.View) -> nodes.RunContext | str:
    """The run's context at this relaxation step, cached until the topology gains a group."""
    state = view.state()
    cached = run.contexts.get(state)
    if cached is not None and cached[0] == len(b.topology.groups):
        return cached[1]
    ctx = _build_context(b, view)
    run.contexts[state] = (len(b.topology.groups), ctx)
    return ctx


def _build_context(b: board.Board, view: preferences.View) -> nodes.RunContext | str:
    pod = view.pod
    if pod.unsupported:
        return pod.unsupported
    alts = volumes.alternatives(pod, b.volume_catalog)
    if isinstance(alts, str):
        return alts
    strict = view.strict_requirements()
    owned = b.topology.owned(
        pod, node_reqs=strict, spread=view.spread, affinity=view.affinity_terms(), anti=view.anti_affinity_terms()
    )
    constraints = b.topology.constraints(pod, owned)
    return nodes.RunContext(
        pod=pod,
        tolerations=view.tolerations(),
        node_reqs=view.node_requirements(),
        strict=strict,
        volume_alternatives=alts,
        constraints=constraints,
        request=b.index.vector(pod.requests),
        anti_only=all(g.key.kind is topology.Kind.ANTI_AFFINITY for g in constraints),
    )


def _pod_domains(b: board.Board, ctx: nodes.RunContext, g: topology.Group) -> requirements.Requirement:
    key = g.key.topology_key
    return (ctx.strict.get(key) if not g.key.inverse else None) or b.topology.exists(key)


def _bulk_safe(b: board.Board, ctx: nodes.RunContext) -> bool:
    """Can placing pods of this run on one slot never make an earlier-refused slot acceptable?

    True when every constraint is keyed on hostname (placing touches only that slot's own domain), is an
    anti-affinity (counts only grow, so refusals only spread), or is an affinity already anchored in a domain
    the pod may use (placing only adds to domains already allowed). Zonal spread and a self-affinity still
    choosing its first domain move the allowed domains as pods land, so those runs go one pod at a time."""
    for g in ctx.constraints:
        if g.key.topology_key == labels.LABEL_HOSTNAME or g.key.inverse:
            continue
        if g.key.kind is topology.Kind.ANTI_AFFINITY:
            continue
        if g.key.kind is topology.Kind.AFFINITY:
            pod_domains = _pod_domains(b, ctx, g)
            if any(pod_domains.has(d) for d in g.positive):
                continue
        return False
    return True


# --- candidates -----------------------------------------------------------------------------------------------
def _candidates(
    b: board.Board, run: Run, *, ctx: nodes.RunContext, state: tuple[object, ...], domains: bool = True
) -> catalog.IntArray:
    """Slot ids worth a full check, in order (`domains=False`: skip the domain filter, which is the only part
    that can readmit a slot later). The reference path checks every slot."""
    n = b.table.n
    dead = run.dead.get(state)
    if dead is None or len(dead) < n:
        grown = np.zeros(max(n, 2 * len(dead) if dead is not None else n, 16), dtype=np.bool_)
        if dead is not None:
            grown[: len(dead)] = dead
        dead = run.dead[state] = grown
    if b.pod_by_pod:
        return np.arange(n)
    mask = b.table.fitting(ctx.request) & ~dead[:n]
    selecting = b.topology.selecting(ctx.pod)
    for g in ctx.constraints if domains else ():
        allowed = b.table.allowed(g, self_selecting=g in selecting, pod_domains=_pod_domains(b, ctx, g))
        if allowed is not None:
            mask &= allowed
    return np.flatnonzero(mask)


def _kill(run: Run, state: tuple[object, ...], *, slot_id: int) -> None:
    """Remember that `slot_id` refuses this run at this step for good."""
    dead = run.dead[state]
    if slot_id >= len(dead):
        dead = run.dead[state] = np.concatenate([dead, np.zeros(slot_id + 1, dtype=np.bool_)])
    dead[slot_id] = True


# --- one by one -----------------------------------------------------------------------------------------------
def _one_by_one(b: board.Board, run: Run, *, ctx: nodes.RunContext, state: tuple[object, ...], limit: int) -> int | str:
    """Place the run's pods one at a time, exactly as separate `place` calls would, computing the resource
    pre-filter once: headroom only falls and permanent refusals stay, so only the domain filter (which moves
    as counts change) is re-applied per pod, chunk by chunk from the first live candidate (the first fit is
    usually near the front). Stops early when the topology gains a group (new constraints)."""
    cand = _candidates(b, run, ctx=ctx, state=state, domains=False)
    live = np.ones(len(cand), dtype=np.bool_)
    first = 0  # candidates before this position are out for the rest of the run
    selecting = b.topology.selecting(ctx.pod)
    groups = len(b.topology.groups)
    placed = 0
    while placed < limit and len(b.topology.groups) == groups:
        while first < len(cand) and not live[first]:
            first += 1
        done = False
        for start in range(first, len(cand), _CHUNK):
            stop = min(start + _CHUNK, len(cand))
            mask = live[start:stop].copy()
            for g in ctx.constraints:
                allowed = b.table.allowed(
                    g, self_selecting=g in selecting, pod_domains=_pod_domains(b, ctx, g), among=cand[start:stop]
                )
                if allowed is not None:
                    mask &= allowed
            for pos in (np.flatnonzero(mask) + start).tolist():
                slot_id = int(cand[pos])
                fit = nodes.evaluate(b.slots[slot_id], ctx, b.topology, limit=1, min_values_policy=b.min_values_policy)
                if isinstance(fit, nodes.Fit):
                    placed += b.commit(slot_id, fit, run_pods=run.pods[placed:], ctx=ctx)
                    done = True
                    break
                b.table.tighten(slot_id)
                if fit.permanent:
                    _kill(run, state, slot_id=slot_id)
                    live[pos] = False
                elif not b.table.fits(slot_id, ctx.request):
                    live[pos] = False  # headroom only falls: it cannot take this run's pods any more
            if done:
                break
        if done:
            continue
        got = claiming.open_claims(b, ctx, limit=1, run_pods=run.pods[placed:], bulk=False)
        if isinstance(got, str):
            return placed if placed else got
        placed += got
        cand = np.append(cand, b.table.n - 1)
        live = np.append(live, True)
    return placed


# --- spread over a domain key -----------------------------------------------------------------------------------
def _domain_spread(ctx: nodes.RunContext) -> topology.Group | None:
    """The run's only constraint when it is a topology spread over a key other than hostname (zone, capacity
    type) and nothing else ties placements together (no host ports; no anti-affinity, whose inverse groups would
    appear as pods land): such runs go through `_SpreadWalk`. None otherwise."""
    if len(ctx.constraints) != 1 or ctx.pod.host_ports or ctx.pod.anti_affinity:
        return None
    g = ctx.constraints[0]
    if g.key.kind is not topology.Kind.SPREAD or g.key.inverse or g.key.topology_key == labels.LABEL_HOSTNAME:
        return None
    return g


class _SpreadWalk:
    """Places a spread run pod by pod, exactly as `_one_by_one` would, without a full check and commit per pod.

    Why it is exact: a slot *pinned* to one domain d of the spread key takes the next pod iff d is allowed now
    (`count(d) + self - min <= maxSkew`, as `Group.next_domains` decides for a node whose only candidate is d) and
    the pod fits the slot otherwise, which does not depend on the counts: topology then adds nothing to the
    slot's requirements. That *static* check (`nodes.evaluate` without the constraint) answers once how many of
    the run's pods the slot can take (its room; filling a node one pod at a time or several at once ends in the
    same state), so while pods only land on pinned slots the walk just tracks counts and rooms and defers the
    commits; a slot whose static check refuses never takes a pod of this run. Slots that still allow several
    domains choose one from the counts, so before one is checked (or a claim is opened) the deferred pods are
    committed and the full check runs as in `_one_by_one`. Each pod goes to the lowest slot id that accepts it."""

    def __init__(
        self,
        b: board.Board,
        run: Run,
        *,
        ctx: nodes.RunContext,
        state: tuple[object, ...],
        group: topology.Group,
        limit: int,
    ) -> None:
        self.b, self.run_, self.ctx, self.state, self.group, self.limit = b, run, ctx, state, group, limit
        self.static = dataclasses.replace(ctx, constraints=[])  # the check minus the spread constraint
        self.key = group.key.topology_key
        self.pod_domains = _pod_domains(b, ctx, group)
        self.selected = group in b.topology.selecting(ctx.pod)  # the run's own pods count in the group
        eligible = sorted(d for d in group.universe if self.pod_domains.has(d))  # as Group.min_count
        min_domains = group.key.min_domains
        self.eligible = [] if min_domains is not None and len(eligible) < min_domains else eligible
        self.placed = 0
        self.queues: dict[str, list[int]] = {}  # domain -> slot ids pinned to it, ascending
        self.heads: dict[str, int] = {}  # domain -> position of the first entry not yet known to refuse
        self.gone: set[int] = set()  # pinned slots that take no more pods of the run
        self.open: list[int] = []  # slots not pinned to one domain, ascending (full check, as `_one_by_one`)
        self.room: dict[int, int] = {}  # pinned slots known to accept: pods of the run they still take
        self.domain: dict[int, str] = {}
        self.counted: dict[int, bool] = {}  # does a pod landing there count in the group (Topology._count)?
        self.pending: dict[int, list[pods.Pod]] = {}  # deferred commits per slot, in pod order
        self.delta: dict[str, int] = {}  # deferred count increments per domain
        cand = _candidates(b, run, ctx=ctx, state=state, domains=False)
        codes, names = b.table.pinned(self.key, cand)
        self.open = cand[codes < 0].tolist()
        for code in np.unique(codes[codes >= 0]).tolist():
            self.queues[names[code]] = cand[codes == code].tolist()
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
            got = claiming.open_claims(self.b, self.ctx, limit=1, run_pods=self.run_.pods[self.placed :], bulk=False)
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
        self.pending.setdefault(slot_id, []).append(self.run_.pods[self.placed])
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
                self.placed += b.commit(slot_id, fit, run_pods=self.run_.pods[self.placed :], ctx=self.ctx)
                self.open.remove(slot_id)
                self._adopt(slot_id)
                return True
            b.table.tighten(slot_id)
            if fit.permanent:
                _kill(self.run_, self.state, slot_id=slot_id)
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
