"""`solve`: place pending pods on existing nodes, in-flight claims and new NodeClaims (reference §2.2).

Queue: pods sorted by (cpu desc, memory desc, signature, creation, uid); pods with equal signatures form a *run*.
Slots are tried in a fixed order — existing nodes (initialized first, then by name), then claims of this solve in
creation order (upstream sorts in-flight claims by pod count; a fixed order is what makes bulk placement exact),
then one new claim per pool in weight order. `pod_by_pod=True` is the reference: runs of one, every slot checked.

The fast path gives the same placements, in the same order:
* a `slots.SlotTable` pre-filter drops slots that certainly refuse (headroom below the request, or pinned to a
  domain a constraint excludes) before any full check;
* *bulk-safe* runs (every constraint keyed on hostname, an anti-affinity, or an affinity already anchored) place
  several pods per slot in one pass, because placing on one slot cannot make an earlier slot acceptable; when the
  run's pods only ever touch hostname domains, the claims it opens are identical but for the hostname and are
  cloned;
* other runs (zonal spread, a self-affinity choosing its first domain) go one pod at a time over a resource
  pre-filter computed once per run, re-applying only the domain filter per pod.
Relaxed placements (a preference dropped) place one pod; the next pod starts strict again, as upstream does.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from karpy.api import labels, meta, nodepool
from karpy.cloudprovider import types
from karpy.scheduling import (
    bound,
    catalog,
    nodes,
    plans,
    pods,
    preferences,
    repack,
    requirements,
    resources,
    results,
    slots,
    taints,
    topology,
    volumes,
)

_CHUNK = 256  # candidates masked at a time when placing pods one by one

# Aliases: the public dataclasses below have fields named `pods` and `volumes`, which shadow the modules.
Pod = pods.Pod
VolumeCatalog = volumes.VolumeCatalog


@dataclass(frozen=True, slots=True)
class ExistingNode:
    name: str
    labels: Mapping[str, str]
    taints: tuple[meta.Taint, ...]
    allocatable: Mapping[str, int]
    pods: tuple[Pod, ...] = ()
    nodepool: str | None = None
    initialized: bool = True
    marked_for_deletion: bool = False


@dataclass(frozen=True, slots=True)
class SchedulingInput:
    pods: Sequence[Pod]
    nodepools: Sequence[nodepool.NodePool]
    instance_types: Mapping[str, Sequence[types.InstanceType]]
    existing_nodes: Sequence[ExistingNode] = ()
    bound_pods: Sequence[Pod] = ()
    daemonsets: Sequence[Pod] = ()
    volumes: VolumeCatalog = field(default_factory=VolumeCatalog)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    preference_policy: str = preferences.POLICY_RESPECT
    min_values_policy: str = nodes.MIN_VALUES_STRICT
    compute_lower_bound: bool = True


@dataclass(slots=True)
class _Run:
    pods: list[pods.Pod]
    dead: dict[tuple[object, ...], catalog.BoolArray] = field(default_factory=dict)  # state -> refused for good
    contexts: dict[tuple[object, ...], tuple[int, nodes.RunContext | str]] = field(default_factory=dict)
    failed_at: int = -1
    reason: str = ""


class _Solver:
    def __init__(self, inp: SchedulingInput, *, pod_by_pod: bool) -> None:
        self.inp = inp
        self.pod_by_pod = pod_by_pod
        node_allocs = [n.allocatable for n in inp.existing_nodes]
        all_types = [t.allocatable for ts in inp.instance_types.values() for t in ts]
        self.index = catalog.ResourceIndex.build([*(p.requests for p in inp.pods), *node_allocs, *all_types])
        active = [p for p in inp.nodepools if p.metadata.deletion_timestamp is None and p.replicas is None]
        active.sort(key=lambda p: (-(p.weight or 0), p.name))
        self.pools = [
            catalog.PoolCatalog(p, inp.instance_types.get(p.name, ()), index=self.index, daemons=inp.daemonsets)
            for p in active
        ]
        self.prefer_taints = any(taints.has_prefer_no_schedule(c.taints) for c in self.pools)
        self.remaining = {c.name: dict(c.pool.limits) for c in self.pools}
        self.slots: list[nodes.Slot] = []
        self.table = slots.SlotTable(len(self.index.names))
        self.claims: list[nodes.Slot] = []
        bound_pods: dict[str, tuple[pods.Pod, ExistingNode]] = {}
        by_name = {n.name: n for n in inp.existing_nodes}
        for n in inp.existing_nodes:
            for p in n.pods:
                bound_pods[p.key] = (p, n)
        for p in inp.bound_pods:
            if p.node_name in by_name and p.key not in bound_pods:
                bound_pods[p.key] = (p, by_name[p.node_name])
        usable = sorted(
            (n for n in inp.existing_nodes if not n.marked_for_deletion), key=lambda n: (not n.initialized, n.name)
        )
        on_node: dict[str, list[pods.Pod]] = collections.defaultdict(list)
        for p, n in bound_pods.values():
            on_node[n.name].append(p)
        for n in usable:
            used = sum(
                (self.index.vector(p.requests) for p in on_node[n.name]), np.zeros(len(self.index.names), np.int64)
            )
            slot = nodes.node_slot(
                n.name,
                dict(n.labels),
                n.taints,
                alloc=self.index.vector(n.allocatable),
                used=used,
                bound=on_node[n.name],
            )
            self.slots.append(slot)
            self.table.add(slot)
            owner = n.nodepool or n.labels.get(labels.LABEL_NODEPOOL)  # the label is what upstream reads
            if owner in self.remaining:
                left = self.remaining[owner]
                for k in left:
                    left[k] -= 1000 if k == labels.RESOURCE_NODES else n.allocatable.get(k, 0)
        sources = [self._pool_source(c) for c in self.pools]
        sources += [
            topology.DomainSource(
                requirements.Requirements.from_labels(n.labels),
                n.taints,
                {k: frozenset({v}) for k, v in {**n.labels, labels.LABEL_HOSTNAME: n.name}.items()},
            )
            for n in inp.existing_nodes
        ]
        self.topology = topology.Topology(
            sources=sources,
            bound=[
                topology.BoundPod(
                    p, requirements.Requirements.from_labels({labels.LABEL_HOSTNAME: n.name, **n.labels}), n.taints
                )
                for p, n in bound_pods.values()
            ],
            namespace_labels=inp.namespace_labels,
        )
        self.placements = 0
        self.result = results.Results()

    @staticmethod
    def _pool_source(c: catalog.PoolCatalog) -> topology.DomainSource:
        return topology.DomainSource(c.requirements, c.taints, c.domains())

    # --- context ----------------------------------------------------------------------------------------------
    def _context(self, run: _Run, view: preferences.View) -> nodes.RunContext | str:
        """The run's context at this relaxation step, cached until the topology gains a group."""
        state = view.state()
        cached = run.contexts.get(state)
        if cached is not None and cached[0] == len(self.topology.groups):
            return cached[1]
        ctx = self._build_context(view)
        run.contexts[state] = (len(self.topology.groups), ctx)
        return ctx

    def _build_context(self, view: preferences.View) -> nodes.RunContext | str:
        pod = view.pod
        if pod.unsupported:
            return pod.unsupported
        alts = volumes.alternatives(pod, self.inp.volumes)
        if isinstance(alts, str):
            return alts
        strict = view.strict_requirements()
        owned = self.topology.owned(
            pod, node_reqs=strict, spread=view.spread, affinity=view.affinity_terms(), anti=view.anti_affinity_terms()
        )
        constraints = self.topology.constraints(pod, owned)
        return nodes.RunContext(
            pod=pod,
            tolerations=view.tolerations(),
            node_reqs=view.node_requirements(),
            strict=strict,
            volume_alternatives=alts,
            constraints=constraints,
            request=self.index.vector(pod.requests),
            anti_only=all(g.key.kind is topology.Kind.ANTI_AFFINITY for g in constraints),
        )

    def _pod_domains(self, ctx: nodes.RunContext, g: topology.Group) -> requirements.Requirement:
        key = g.key.topology_key
        return (ctx.strict.get(key) if not g.key.inverse else None) or self.topology.exists(key)

    def _bulk_safe(self, ctx: nodes.RunContext) -> bool:
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
                pod_domains = self._pod_domains(ctx, g)
                if any(pod_domains.has(d) for d in g.positive):
                    continue
            return False
        return True

    def _candidates(
        self, run: _Run, ctx: nodes.RunContext, state: tuple[object, ...], *, domains: bool = True
    ) -> catalog.IntArray:
        """Slot ids worth a full check, in order (`domains=False`: skip the domain filter, which is the only part
        that can readmit a slot later). The reference path checks every slot."""
        n = self.table.n
        dead = run.dead.get(state)
        if dead is None or len(dead) < n:
            grown = np.zeros(max(n, 2 * len(dead) if dead is not None else n, 16), dtype=np.bool_)
            if dead is not None:
                grown[: len(dead)] = dead
            dead = run.dead[state] = grown
        if self.pod_by_pod:
            return np.arange(n)
        mask = self.table.fitting(ctx.request) & ~dead[:n]
        selecting = self.topology.selecting(ctx.pod)
        for g in ctx.constraints if domains else ():
            allowed = self.table.allowed(g, self_selecting=g in selecting, pod_domains=self._pod_domains(ctx, g))
            if allowed is not None:
                mask &= allowed
        return np.flatnonzero(mask)

    # --- placement --------------------------------------------------------------------------------------------
    def _commit(self, slot_id: int, fit: nodes.Fit, run_pods: list[pods.Pod], ctx: nodes.RunContext) -> int:
        slot = self.slots[slot_id]
        placed = run_pods[: fit.count]
        slot.used = slot.used + ctx.request * fit.count
        slot.requirements = fit.requirements
        if fit.options is not None:
            slot.options = fit.options
            if fit.floor is not None:
                slot.floor = (fit.options, fit.floor)
        slot.placed.extend(placed)
        slot.host_ports.extend(p for pod in placed for p in pod.host_ports)
        slot.min_values_relaxed |= fit.min_values_relaxed
        self.table.refresh(slot_id)
        self.topology.record(ctx.pod, fit.requirements, slot.taints, fit.count)
        self.placements += fit.count
        return fit.count

    def _try(self, run: _Run, view: preferences.View, limit: int) -> int | str:
        """Place up to `limit` pods of the run (one unless the run is bulk-safe); a reason when none fits."""
        ctx = self._context(run, view)
        if isinstance(ctx, str):
            return ctx
        state = view.state()
        bulk = limit > 1 and self._bulk_safe(ctx)
        if limit > 1 and not bulk:
            return self._one_by_one(run, ctx, state, limit)
        placed = 0
        for slot_id in self._candidates(run, ctx, state).tolist():
            fit = nodes.evaluate(
                self.slots[slot_id],
                ctx,
                self.topology,
                limit=limit - placed,
                min_values_policy=self.inp.min_values_policy,
            )
            if isinstance(fit, nodes.Fit):
                placed += self._commit(slot_id, fit, run.pods[placed:], ctx)
                if placed == limit:
                    return placed
            else:
                self.table.tighten(slot_id)  # it passed the headroom filter yet refused: sharpen the bound
                if fit.permanent:
                    self._kill(run, state, slot_id)
        while placed < limit:
            got = self._new_claims(ctx, limit - placed, run.pods[placed:], bulk=bulk)
            if isinstance(got, str):
                return placed if placed else got
            placed += got
        return placed

    @staticmethod
    def _kill(run: _Run, state: tuple[object, ...], slot_id: int) -> None:
        """Remember that `slot_id` refuses this run at this step for good."""
        dead = run.dead[state]
        if slot_id >= len(dead):
            dead = run.dead[state] = np.concatenate([dead, np.zeros(slot_id + 1, dtype=np.bool_)])
        dead[slot_id] = True

    def _one_by_one(self, run: _Run, ctx: nodes.RunContext, state: tuple[object, ...], limit: int) -> int | str:
        """Place the run's pods one at a time, exactly as separate `_try` calls would, computing the resource
        pre-filter once: headroom only falls and permanent refusals stay, so only the domain filter (which moves
        as counts change) is re-applied per pod, chunk by chunk from the first live candidate (the first fit is
        usually near the front). Stops early when the topology gains a group (new constraints)."""
        cand = self._candidates(run, ctx, state, domains=False)
        live = np.ones(len(cand), dtype=np.bool_)
        first = 0  # candidates before this position are out for the rest of the run
        selecting = self.topology.selecting(ctx.pod)
        groups = len(self.topology.groups)
        placed = 0
        while placed < limit and len(self.topology.groups) == groups:
            while first < len(cand) and not live[first]:
                first += 1
            done = False
            for start in range(first, len(cand), _CHUNK):
                stop = min(start + _CHUNK, len(cand))
                mask = live[start:stop].copy()
                for g in ctx.constraints:
                    allowed = self.table.allowed(
                        g, self_selecting=g in selecting, pod_domains=self._pod_domains(ctx, g), among=cand[start:stop]
                    )
                    if allowed is not None:
                        mask &= allowed
                for pos in (np.flatnonzero(mask) + start).tolist():
                    slot_id = int(cand[pos])
                    fit = nodes.evaluate(
                        self.slots[slot_id], ctx, self.topology, limit=1, min_values_policy=self.inp.min_values_policy
                    )
                    if isinstance(fit, nodes.Fit):
                        placed += self._commit(slot_id, fit, run.pods[placed:], ctx)
                        done = True
                        break
                    self.table.tighten(slot_id)
                    if fit.permanent:
                        self._kill(run, state, slot_id)
                        live[pos] = False
                    elif not self.table.fits(slot_id, ctx.request):
                        live[pos] = False  # headroom only falls: it cannot take this run's pods any more
                if done:
                    break
            if done:
                continue
            got = self._new_claims(ctx, 1, run.pods[placed:], bulk=False)
            if isinstance(got, str):
                return placed if placed else got
            placed += got
            cand = np.append(cand, self.table.n - 1)
            live = np.append(live, True)
        return placed

    def _new_claims(self, ctx: nodes.RunContext, limit: int, run_pods: list[pods.Pod], *, bulk: bool) -> int | str:
        """Open a claim in the first pool (weight order) that takes the next pod; a reason when none does."""
        reasons = []
        for pool in self.pools:
            got = self._new_claim(pool, ctx, limit, run_pods, bulk=bulk)
            if isinstance(got, int):
                return got
            reasons.append(got)
        return "; ".join(reasons) if reasons else "no nodepool is available (none ready, or all static)"

    def _limit_options(self, pool: catalog.PoolCatalog) -> catalog.BoolArray | str:
        prefix = f'incompatible with nodepool "{pool.name}"'
        remaining = self.remaining[pool.name]
        if remaining.get(labels.RESOURCE_NODES, 1000) < 1000:
            return f'{prefix}, nodes limit of nodepool "{pool.name}" reached'
        options = np.ones(len(pool.types), dtype=np.bool_)
        for k, left in remaining.items():
            if k != labels.RESOURCE_NODES and k in self.index.names:
                options &= pool.capacity[:, self.index.names.index(k)] <= left
        if len(pool.types) and not options.any():
            return f'all available instance types exceed limits for nodepool: "{pool.name}"'
        return options

    def _charge(self, pool: catalog.PoolCatalog, first: catalog.BoolArray) -> None:
        remaining = self.remaining[pool.name]
        for k in list(remaining):
            if k == labels.RESOURCE_NODES:
                remaining[k] -= 1000
            elif k in self.index.names and first.any():
                remaining[k] -= int(pool.capacity[first, self.index.names.index(k)].max())

    def _claim_slot(self, pool: catalog.PoolCatalog, options: catalog.BoolArray) -> nodes.Slot:
        hostname = f"hostname-placeholder-{len(self.claims):04d}"
        return nodes.Slot(
            hostname,
            pool.requirements.add(requirements.Requirement.in_(labels.LABEL_HOSTNAME, (hostname,))),
            pool.taints,
            np.zeros(len(self.index.names), dtype=np.int64),
            pool=pool,
            options=options,
        )

    def _register(self, slot: nodes.Slot, *, like: int | None = None) -> int:
        self.slots.append(slot)
        self.claims.append(slot)
        return self.table.add(slot, like=like)

    def _new_claim(
        self, pool: catalog.PoolCatalog, ctx: nodes.RunContext, limit: int, run_pods: list[pods.Pod], *, bulk: bool
    ) -> int | str:
        options = self._limit_options(pool)
        if isinstance(options, str):
            return options
        probe = self._claim_slot(pool, options)
        fit = nodes.evaluate(probe, ctx, self.topology, limit=limit, min_values_policy=self.inp.min_values_policy)
        if isinstance(fit, nodes.Refusal):
            overhead = resources.describe(pool.index.to_map(pool.daemon.max(axis=0))) if len(pool.types) else "{}"
            return f'incompatible with nodepool "{pool.name}", daemonset overhead={overhead}, {fit.reason}'
        assert fit.first_options is not None
        self._charge(pool, fit.first_options)
        slot_id = self._register(probe)
        placed = self._commit(slot_id, fit, run_pods, ctx)
        if bulk and placed < limit and self._clonable(ctx, fit):
            placed += self._clone_claims(pool, ctx, fit, options, run_pods[placed:], limit - placed)
        return placed

    def _clonable(self, ctx: nodes.RunContext, fit: nodes.Fit) -> bool:
        """Would the next claims of this run come out identical to this one except for the hostname?

        True when recording the run's pods touches hostname domains only (so the state every other candidate
        and pool was refused under is unchanged) and nothing but the placeholder defines the hostname."""
        pod = ctx.pod
        host = labels.LABEL_HOSTNAME
        if any(t.topology_key != host for t in pod.anti_affinity):
            return False
        if any(g.key.topology_key != host for g in self.topology.selecting(pod) if not g.key.inverse):
            return False
        if ctx.node_reqs.get(host) is not None or any(a.get(host) is not None for a in ctx.volume_alternatives):
            return False
        if host in self.pools[0].label_keys or any(host in p.label_keys for p in self.pools):
            return False
        return fit.count >= 1

    def _clone_claims(
        self,
        pool: catalog.PoolCatalog,
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
        first = self.table.n - 1  # the claim being copied: same options, so the same headroom bound
        base = fit.requirements.without(labels.LABEL_HOSTNAME)
        limited = any(k != labels.RESOURCE_NODES for k in self.remaining[pool.name])
        while limit - placed >= fit.count:
            if limited:
                now = self._limit_options(pool)
                if isinstance(now, str) or not np.array_equal(now, options):
                    break
            elif self.remaining[pool.name].get(labels.RESOURCE_NODES, 1000) < 1000:
                break
            self._charge(pool, fit.first_options)
            slot = self._claim_slot(pool, options)
            slot_id = self._register(slot, like=first)
            reqs = base.add(requirements.Requirement.in_(labels.LABEL_HOSTNAME, (slot.name,)))
            clone = nodes.Fit(fit.count, reqs, fit.options, fit.first_options, fit.min_values_relaxed, fit.floor)
            placed += self._commit(slot_id, clone, run_pods[placed:], ctx)
        return placed

    # --- loop -------------------------------------------------------------------------------------------------
    def solve(self) -> results.Results:
        queue = collections.deque(self._runs())
        while queue:
            run = queue.popleft()
            if run.failed_at == self.placements:
                for p in run.pods:
                    self.result.unschedulable[p.key] = run.reason
                continue
            while run.pods:
                view: preferences.View | None = preferences.View.initial(
                    run.pods[0], policy=self.inp.preference_policy, prefer_taints_exist=self.prefer_taints
                )
                strict = True
                reason = ""
                while view is not None:
                    got = self._try(run, view, len(run.pods) if strict and not self.pod_by_pod else 1)
                    if isinstance(got, int):
                        run.pods = run.pods[got:]
                        break
                    reason = got
                    view = view.relax(prefer_taints_exist=self.prefer_taints)
                    strict = False
                if view is None:
                    run.failed_at, run.reason = self.placements, reason
                    queue.append(run)
                    break
        self.claims = repack.repack(self.claims, topo=self.topology)  # cost post-pass (same for both paths)
        return self._results()

    def _runs(self) -> list[_Run]:
        ordered = sorted(self.inp.pods, key=lambda p: (p.creation_timestamp, p.uid, p.key))
        sig_rank: dict[tuple[object, ...], int] = {}
        keyed = []
        for p in ordered:
            sig = p.signature()
            rank = sig_rank.setdefault(sig, len(sig_rank))
            cpu, mem = p.requests.get(labels.RESOURCE_CPU, 0), p.requests.get(labels.RESOURCE_MEMORY, 0)
            keyed.append(((-cpu, -mem, rank), p))
        keyed.sort(key=lambda kp: kp[0])
        runs: list[_Run] = []
        last = None
        for k, p in keyed:
            if self.pod_by_pod or k != last:
                runs.append(_Run([]))
            runs[-1].pods.append(p)
            last = k
        return runs

    def _results(self) -> results.Results:
        out = self.result
        for slot in self.slots:
            if slot.pool is None and slot.placed:
                out.existing_nodes[slot.name] = list(slot.placed)
        offers: plans.OfferCache = {}
        for slot in self.claims:
            out.new_nodeclaims.append(plans.plan(slot, self.index, offers))
        out.cost_per_hour = sum(c.cheapest.price for c in out.new_nodeclaims if c.cheapest is not None)
        if self.inp.compute_lower_bound and self.claims:
            out.lower_bound_per_hour = bound.lower_bound(self.claims, self.index)
        return out


def solve(inp: SchedulingInput, *, pod_by_pod: bool = False) -> results.Results:
    """Plan where every pending pod goes; `pod_by_pod` selects the unbatched reference path."""
    return _Solver(inp, pod_by_pod=pod_by_pod).solve()
