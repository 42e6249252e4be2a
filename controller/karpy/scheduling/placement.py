"""Placing a run (pods with equal signatures) on a `board.Board` at one relaxation step: existing slots first, in
order, through the `slots.SlotTable` pre-filter, then new claims (`claiming`).

*Bulk-safe* runs place several pods per slot in one pass; a run whose only constraint is a spread over zone or
capacity type goes through `spreading.Walk` (pod by pod from counts and per-slot room); other runs go one pod at a
time over a resource pre-filter computed once per run, re-applying only the domain filter per pod (see `scheduler`
for why all give the reference placements). No I/O."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import board, catalog, claiming, nodes, pods, preferences, spreading, topology, volumes

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
        group = spreading.walkable(ctx)
        if group is not None:
            return spreading.Walk(
                b,
                ctx=ctx,
                group=group,
                run_pods=run.pods,
                candidates=_candidates(b, run, ctx=ctx, state=state, domains=False),
                pod_domains=_pod_domains(b, ctx, group),
                limit=limit,
                kill=lambda slot_id: _kill(run, state, slot_id=slot_id),
            ).run()
        return _one_by_one(b, run, ctx=ctx, state=state, limit=limit)
    placed = 0
    for slot_id in _ids(_candidates(b, run, ctx=ctx, state=state)):
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
    ctx = build_context(b, view)
    run.contexts[state] = (len(b.topology.groups), ctx)
    return ctx


def build_context(b: board.Board, view: preferences.View) -> nodes.RunContext | str:
    """What every check of the view's pod needs, or why the pod cannot be placed anywhere (unsupported fields,
    unusable volumes)."""
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
        attachments=volumes.attachments(pod, b.volume_catalog) if b.volume_limited and pod.pvc_names else {},
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


def _ids(candidates: catalog.IntArray) -> Iterator[int]:
    """The candidates in order, a chunk at a time: the first usually takes the pod, and a cluster has thousands."""
    for start in range(0, len(candidates), _CHUNK):
        yield from candidates[start : start + _CHUNK].tolist()


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
