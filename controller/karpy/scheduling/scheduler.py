"""`solve`: place pending pods on existing nodes, in-flight claims and new NodeClaims (reference §2.2).

Queue: pods sorted by (cpu desc, memory desc, signature, creation, uid); pods with equal signatures form a *run*.
A run is placed in bulk: each candidate node answers how many of the run fit at once (vectorised over instance
types), which equals placing them one by one because (a) candidates are tried in a fixed order — existing nodes
(initialized first, then by name), then claims of this solve in creation order (upstream sorts in-flight claims by
pod count; fixed order is what makes bulk placement exact and packs tighter), then one new claim per pool in weight
order — and (b) bulk counts above one are only used when every topology constraint of the run is keyed on
hostname (placing on one node cannot make an earlier node acceptable). Otherwise the run advances one pod at a
time, still skipping nodes that refused it permanently. `pod_by_pod=True` is the reference path (runs of one).
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
    pods,
    preferences,
    repack,
    requirements,
    resources,
    results,
    taints,
    topology,
    volumes,
)

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
    cursors: dict[tuple[object, ...], list[int]] = field(default_factory=dict)  # view state -> live slot ids
    seen: dict[tuple[object, ...], int] = field(default_factory=dict)  # view state -> slots already listed
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
            if n.nodepool in self.remaining:
                for k in self.remaining[n.nodepool]:
                    cap = labels.RESOURCE_NODES if k == labels.RESOURCE_NODES else k
                    self.remaining[n.nodepool][k] -= 1000 if cap == labels.RESOURCE_NODES else n.allocatable.get(k, 0)
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
        domains: dict[str, set[str]] = collections.defaultdict(set)
        for o in c.offers:
            for k, v in o.labels().items():
                req = c.requirements.get(k)
                if req is None or req.has(v):
                    domains[k].add(v)
        for t in c.types:
            for k, v in t.labels.items():
                domains[k].add(v)
        for k, req in c.requirements.items():
            if req.values() is not None:
                domains[k] |= req.values() or set()
        return topology.DomainSource(c.requirements, c.taints, {k: frozenset(v) for k, v in domains.items()})

    # --- context ----------------------------------------------------------------------------------------------
    def _context(self, view: preferences.View) -> nodes.RunContext | str:
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
            hostname_only=all(g.key.topology_key == labels.LABEL_HOSTNAME for g in constraints),
        )

    # --- placement --------------------------------------------------------------------------------------------
    def _commit(self, slot: nodes.Slot, fit: nodes.Fit, run_pods: list[pods.Pod], ctx: nodes.RunContext) -> int:
        placed = run_pods[: fit.count]
        slot.used = slot.used + ctx.request * fit.count
        slot.requirements = fit.requirements
        if fit.options is not None:
            slot.options = fit.options
        slot.placed.extend(placed)
        slot.host_ports.extend(p for pod in placed for p in pod.host_ports)
        slot.min_values_relaxed |= fit.min_values_relaxed
        self.topology.record(ctx.pod, fit.requirements, slot.taints, fit.count)
        self.placements += fit.count
        return fit.count

    def _try(self, run: _Run, view: preferences.View, limit: int) -> int | str:
        ctx = self._context(view)
        if isinstance(ctx, str):
            return ctx
        state = (view.state(),)
        live = run.cursors.setdefault(state, [])
        seen = run.seen.get(state, 0)
        live.extend(range(seen, len(self.slots)))
        run.seen[state] = len(self.slots)
        limit = limit if ctx.hostname_only else 1
        kept: list[int] = []
        for pos, slot_id in enumerate(live):
            slot = self.slots[slot_id]
            fit = nodes.evaluate(slot, ctx, self.topology, limit=limit, min_values_policy=self.inp.min_values_policy)
            if isinstance(fit, nodes.Fit):
                kept.extend(live[pos:])
                run.cursors[state] = kept
                return self._commit(slot, fit, run.pods, ctx)
            if not fit.permanent:
                kept.append(slot_id)
        run.cursors[state] = kept
        reasons = []
        for pool in self.pools:
            got = self._new_claim(pool, ctx, limit, run.pods)
            if isinstance(got, int):
                run.seen[state] = len(self.slots)  # the new claim is full or refused the next pod: recheck later
                run.cursors[state].append(len(self.slots) - 1)
                return got
            reasons.append(got)
        return "; ".join(reasons) if reasons else "no nodepool is available (none ready, or all static)"

    def _new_claim(
        self, pool: catalog.PoolCatalog, ctx: nodes.RunContext, limit: int, run_pods: list[pods.Pod]
    ) -> int | str:
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
        hostname = f"hostname-placeholder-{len(self.claims):04d}"
        slot = nodes.Slot(
            hostname,
            pool.requirements.add(requirements.Requirement.in_(labels.LABEL_HOSTNAME, (hostname,))),
            pool.taints,
            np.zeros(len(self.index.names), dtype=np.int64),
            pool=pool,
            options=options,
        )
        fit = nodes.evaluate(slot, ctx, self.topology, limit=limit, min_values_policy=self.inp.min_values_policy)
        if isinstance(fit, nodes.Refusal):
            overhead = resources.describe(pool.index.to_map(pool.daemon.max(axis=0))) if len(pool.types) else "{}"
            return f"{prefix}, daemonset overhead={overhead}, {fit.reason}"
        assert fit.first_options is not None
        first = fit.first_options
        for k in list(remaining):
            if k == labels.RESOURCE_NODES:
                remaining[k] -= 1000
            elif k in self.index.names and first.any():
                remaining[k] -= int(pool.capacity[first, self.index.names.index(k)].max())
        self.slots.append(slot)
        self.claims.append(slot)
        return self._commit(slot, fit, run_pods, ctx)

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
        for slot in self.claims:
            out.new_nodeclaims.append(_plan(slot, self.index))
        out.cost_per_hour = sum(c.cheapest.price for c in out.new_nodeclaims if c.cheapest is not None)
        if self.inp.compute_lower_bound and self.claims:
            out.lower_bound_per_hour = bound.lower_bound(self.claims, self.index)
        return out


def _plan(slot: nodes.Slot, index: catalog.ResourceIndex) -> results.PlannedNodeClaim:
    pool = slot.pool
    assert pool is not None
    assert slot.options is not None
    _, prices = pool.offerings(slot.requirements)
    ids = [i for i in np.flatnonzero(slot.options) if np.isfinite(prices[i])]
    ids.sort(key=lambda i: (prices[i], pool.types[i].name))
    cheapest = None
    if ids:
        offer = pool.cheapest_offering(int(ids[0]), slot.requirements)
        if offer is not None:
            cheapest = results.CheapestOffering(pool.types[ids[0]].name, offer.zone, offer.capacity_type, offer.price)
    daemon = pool.daemon[ids].min(axis=0) if ids else np.zeros(len(index.names), np.int64)
    return results.PlannedNodeClaim(
        nodepool=pool.name,
        requirements=slot.requirements,
        instance_type_options=tuple(pool.types[i] for i in ids),
        pods=tuple(slot.placed),
        requests=index.to_map(slot.used + daemon),
        cheapest=cheapest,
        min_values_relaxed=slot.min_values_relaxed,
        hostname=slot.name,
    )


def solve(inp: SchedulingInput, *, pod_by_pod: bool = False) -> results.Results:
    """Plan where every pending pod goes; `pod_by_pod` selects the unbatched reference path."""
    return _Solver(inp, pod_by_pod=pod_by_pod).solve()
