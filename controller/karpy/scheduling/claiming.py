"""Opening new NodeClaims for a run on a `board.Board`: the first pool (weight order) whose limits leave options
and whose fresh claim takes the next pod wins; limits are charged with the largest capacity among the options the
first pod allowed (as upstream reserves). When the run's pods only touch hostname domains, the claims it opens
are identical but for the hostname, so whole copies are cloned instead of re-evaluated. No I/O."""

from __future__ import annotations

import numpy as np

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import board, catalog, nodes, pods, resources, topology


def open_claims(
    b: board.Board, ctx: nodes.RunContext, *, limit: int, run_pods: list[pods.Pod], bulk: bool
) -> int | str:
    """Open a claim in the first pool (weight order) that takes the next pod; a reason when none does."""
    reasons = []
    for pool in b.pools:
        got = _new_claim(b, pool, ctx=ctx, limit=limit, run_pods=run_pods, bulk=bulk)
        if isinstance(got, int):
            return got
        reasons.append(got.reason)
    return "; ".join(reasons) if reasons else NO_NODEPOOL


NO_NODEPOOL = "no nodepool is available (none ready, or all static)"


def refusals(b: board.Board, ctx: nodes.RunContext) -> list[tuple[str, nodes.Refusal]]:
    """(pool name, why a new claim of that pool refuses the run's next pod), for every pool that does; nothing
    changes on the board (what `open_claims` would answer, pool by pool)."""
    out = []
    for pool in b.pools:
        got = _probe(b, pool, ctx=ctx, limit=1)
        if isinstance(got, nodes.Refusal):
            out.append((pool.name, got))
    return out


def _limit_options(b: board.Board, pool: catalog.PoolCatalog) -> catalog.BoolArray | nodes.Refusal:
    prefix = f'incompatible with nodepool "{pool.name}"'
    remaining = b.remaining[pool.name]
    if remaining.get(labels.RESOURCE_NODES, 1000) < 1000:
        why = f'{prefix}, nodes limit of nodepool "{pool.name}" reached'
        return nodes.Refusal(why, True, nodes.RefusalKind.LIMITS)
    options = np.ones(len(pool.types), dtype=np.bool_)
    for k, left in remaining.items():
        if k != labels.RESOURCE_NODES and k in b.index.names:
            options &= pool.capacity[:, b.index.names.index(k)] <= left
    if len(pool.types) and not options.any():
        why = f'all available instance types exceed limits for nodepool: "{pool.name}"'
        return nodes.Refusal(why, True, nodes.RefusalKind.LIMITS)
    return options


def _charge(b: board.Board, pool: catalog.PoolCatalog, *, first: catalog.BoolArray) -> None:
    remaining = b.remaining[pool.name]
    for k in list(remaining):
        if k == labels.RESOURCE_NODES:
            remaining[k] -= 1000
        elif k in b.index.names and first.any():
            remaining[k] -= int(pool.capacity[first, b.index.names.index(k)].max())


def _claim_slot(b: board.Board, pool: catalog.PoolCatalog, *, options: catalog.BoolArray) -> nodes.Slot:
    hostname = f"hostname-placeholder-{len(b.claims):04d}"
    return nodes.Slot(
        hostname,
        pool.requirements.add(requirements.Requirement.in_(labels.LABEL_HOSTNAME, (hostname,))),
        pool.taints,
        np.zeros(len(b.index.names), dtype=np.int64),
        pool=pool,
        options=options,
    )


def _probe(
    b: board.Board, pool: catalog.PoolCatalog, *, ctx: nodes.RunContext, limit: int
) -> tuple[nodes.Slot, catalog.BoolArray, nodes.Fit] | nodes.Refusal:
    """A fresh claim of `pool` (not registered) and how many of the run's pods it takes, or why it takes none."""
    options = _limit_options(b, pool)
    if isinstance(options, nodes.Refusal):
        return options
    probe = _claim_slot(b, pool, options=options)
    fit = nodes.evaluate(probe, ctx, b.topology, limit=limit, min_values_policy=b.min_values_policy)
    if isinstance(fit, nodes.Refusal):
        overhead = resources.describe(pool.index.to_map(pool.daemon.max(axis=0))) if len(pool.types) else "{}"
        why = f'incompatible with nodepool "{pool.name}", daemonset overhead={overhead}, {fit.reason}'
        return nodes.Refusal(why, fit.permanent, fit.kind, decisive=lambda: fit.lead)
    return probe, options, fit


def _new_claim(
    b: board.Board,
    pool: catalog.PoolCatalog,
    *,
    ctx: nodes.RunContext,
    limit: int,
    run_pods: list[pods.Pod],
    bulk: bool,
) -> int | nodes.Refusal:
    got = _probe(b, pool, ctx=ctx, limit=limit)
    if isinstance(got, nodes.Refusal):
        return got
    probe, options, fit = got
    assert fit.first_options is not None
    _charge(b, pool, first=fit.first_options)
    slot_id = b.register(probe)
    placed = b.commit(slot_id, fit, run_pods=run_pods, ctx=ctx)
    if bulk and placed < limit and _clonable(b, ctx, fit=fit):
        placed += _clone_claims(
            b, pool, ctx=ctx, fit=fit, options=options, run_pods=run_pods[placed:], limit=limit - placed
        )
    return placed


def _clonable(b: board.Board, ctx: nodes.RunContext, *, fit: nodes.Fit) -> bool:
    """Would the next claims of this run come out identical to this one except for the hostname?

    True when recording the run's pods touches hostname domains only (so the state every other candidate
    and pool was refused under is unchanged) and nothing but the placeholder defines the hostname."""
    pod = ctx.pod
    host = labels.LABEL_HOSTNAME
    if any(t.topology_key != host for t in pod.anti_affinity):
        return False
    if any(g.key.kind is topology.Kind.AFFINITY and not g.key.inverse for g in ctx.constraints):
        return False  # the next claim is a new hostname: an affinity term admits it only while no domain holds pods
    if any(g.key.topology_key != host for g in b.topology.selecting(pod) if not g.key.inverse):
        return False
    if ctx.node_reqs.get(host) is not None or any(a.get(host) is not None for a in ctx.volume_alternatives):
        return False
    if host in b.pools[0].label_keys or any(host in p.label_keys for p in b.pools):
        return False
    return fit.count >= 1


def _clone_claims(
    b: board.Board,
    pool: catalog.PoolCatalog,
    *,
    ctx: nodes.RunContext,
    fit: nodes.Fit,
    options: catalog.BoolArray,
    run_pods: list[pods.Pod],
    limit: int,
) -> int:
    """Open copies of the claim just made while whole copies are needed and limits leave the same options;
    the last partial claim (different options) goes through the normal path."""
    assert fit.first_options is not None
    placed = 0
    first = b.table.n - 1  # the claim being copied: same options, so the same headroom bound
    base = fit.requirements.without(labels.LABEL_HOSTNAME)
    limited = any(k != labels.RESOURCE_NODES for k in b.remaining[pool.name])
    while limit - placed >= fit.count:
        if limited:
            now = _limit_options(b, pool)
            if isinstance(now, nodes.Refusal) or not np.array_equal(now, options):
                break
        elif b.remaining[pool.name].get(labels.RESOURCE_NODES, 1000) < 1000:
            break
        _charge(b, pool, first=fit.first_options)
        slot = _claim_slot(b, pool, options=options)
        slot_id = b.register(slot, like=first)
        reqs = base.add(requirements.Requirement.in_(labels.LABEL_HOSTNAME, (slot.name,)))
        clone = nodes.Fit(fit.count, reqs, fit.options, fit.first_options, fit.min_values_relaxed, fit.floor)
        placed += b.commit(slot_id, clone, run_pods=run_pods[placed:], ctx=ctx)
    return placed
