"""One disruption pass's view of the cluster, and the command it takes (pure; core: disruption/controller.go
`disrupt`, helpers.go `BuildDisruptionBudgetMapping`, types.go `NewCandidate`).

`context` turns a cluster snapshot and the NodePools' instance types into the methods' `Context`: the candidates of
both disruption classes, the nodes that are none and why (`Context.rejected`), the budgets left per reason, the
pools whose budgets block a reason outright, and a simulation bound to the snapshot. `first_command` asks the methods
in order (`first_command_at` also tells which one answered). The disruption controller runs both every pass; `karpy
explain` runs the same two on the same kind of snapshot to say what that pass would do and why, so the two cannot
disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy.api import donotdisrupt, nodepool
from karpy.cloudprovider import types
from karpy.disruption import budgets, candidates, consolidation, methods, simulation
from karpy.kube import resources
from karpy.scheduling import scheduler
from karpy.state import cluster as state_cluster
from karpy.state import facts, nodepoolstate, statenode


@dataclass(frozen=True, slots=True)
class Options:
    spot_to_spot: bool = False
    """Feature gate SpotToSpotConsolidation."""
    scheduling: karpy_settings.SchedulingSettings = field(default_factory=karpy_settings.SchedulingSettings)
    """The provisioner's preference and minValues policies: simulations must relax as it will."""


class _PodInfos(Mapping[str, candidates.PodInfo]):
    """`candidates.pod_info` of each pod, read once per pass when a node asks (so a pod that cannot be read fails
    its node's evaluation, not the pass); `notice` gets the do-not-disrupt Event of each pod read (upstream
    publishes one wherever it evaluates the annotation for disruption)."""

    def __init__(
        self,
        raw: Mapping[str, Mapping[str, Any]],
        *,
        now: float,
        notice: Callable[[Mapping[str, Any], donotdisrupt.Notice], None],
    ) -> None:
        self._raw = raw
        self._now = now
        self._notice = notice
        self._read: dict[str, candidates.PodInfo] = {}

    def __getitem__(self, key: str) -> candidates.PodInfo:
        found = self._read.get(key)
        if found is None:
            obj = self._raw[key]
            found = self._read[key] = candidates.pod_info(obj, now=self._now)
            told = donotdisrupt.notice(obj, now=self._now)
            if told is not None:
                self._notice(obj, told)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def context(
    cluster: state_cluster.Cluster,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    *,
    clock: karpy_clock.Clock,
    queued: frozenset[str] = frozenset(),
    options: Options = Options(),
    solver: simulation.Solver = scheduler.solve,
    observer: methods.Observer = methods.SILENT,
    seq: int | None = None,
    existing: Sequence[scheduler.ExistingNode] = (),
) -> methods.Context:
    """The methods' view of `cluster` now; `queued` names the NodeClaims already being disrupted, `seq` replaces
    the cluster's as the methods' memo key (a pass that could not see every pool must not be remembered). A node
    whose evaluation raises is neither a candidate nor rejected: it is in `Context.failed`, left alone.
    `existing`: the cluster's state nodes as `simulation.Snapshot.existing`, when the caller derived them already
    (for another solve over the same nodes); derived here otherwise."""
    now = clock.now()
    pools = cluster.nodepools()
    state_nodes = cluster.state_nodes()
    pdbs = [p for p in (candidates.pdb_from_manifest(o) for o in cluster.pdbs()) if p is not None]
    build = functools.partial(
        candidates.new_candidate,
        pools={p.name: p for p in pools},
        instance_types={pool: {t.name: t for t in found} for pool, found in instance_types.items()},
        pod_infos=_PodInfos(
            {facts.key(o): o for o in cluster.objects(resources.PODS)}, now=now, notice=observer.pod_notice
        ),
        pdbs=pdbs,
        now=now,
        queued=queued,
    )
    graceful: list[candidates.Candidate] = []
    eventual: list[candidates.Candidate] = []
    rejected: list[candidates.Rejection] = []
    failed: list[tuple[statenode.StateNode, Exception]] = []
    for n in state_nodes:
        try:
            got = build(n, disruption_class=candidates.DisruptionClass.GRACEFUL)
            if isinstance(got, candidates.Candidate):
                graceful.append(got)
                eventual.append(got)  # the eventual class only tolerates more: a graceful candidate is one too
                continue
            rejected.append(got)
            # Whether drift may pass this node's pod blockers (only with a terminationGracePeriod) is decided by
            # candidates.new_candidate alone: asking again under the eventual class is always safe.
            again = build(n, disruption_class=candidates.DisruptionClass.EVENTUAL)
            if isinstance(again, candidates.Candidate):
                eventual.append(again)
        except Exception as exc:  # a bug on one node must not stop the pass for the others
            failed.append((n, exc))
    snap = simulation.Snapshot(
        pools=pools,
        instance_types=instance_types,
        nodes=state_nodes,
        pending=[*cluster.pending_pods(), *cluster.buffer_pods()],
        daemonsets=cluster.daemonsets(),
        volumes=cluster.volumes(),
        settling=simulation.settling_nodes(state_nodes, pools, now=now),
        existing=tuple(existing),
    )
    reasons = list(nodepool.DisruptionReason)
    return methods.Context(
        clock=clock,
        seq=cluster.seq if seq is None else seq,
        graceful=graceful,
        eventual=eventual,
        budgets={r: budgets.budget_mapping(pools, state_nodes, r, now=now) for r in reasons},
        simulate=simulation.guarded(
            functools.partial(simulation.simulate, snap, solver=solver, options=options.scheduling)
        ),
        spot_to_spot=options.spot_to_spot,
        observer=observer,
        rejected=tuple(rejected),
        blocked={r: tuple(budgets.blocked_pools(pools, state_nodes, r, now=now)) for r in reasons},
        failed=tuple(failed),
        static_counts={
            p.name: nodepoolstate.counts(nodepoolstate.pool_nodes(state_nodes, p.name))
            for p in pools
            if p.replicas is not None
        },
        buffer_pods_on=cluster.buffer_pods_on,
    )


def first_command(method_list: Sequence[methods.Method], ctx: methods.Context) -> consolidation.Command | None:
    """The first command a method returns, in order: what one pass acts on (before validation). The context's
    observer hears of each method tried (`Observer.evaluated`)."""
    found = first_command_at(method_list, ctx)
    return None if found is None else found[1]


def first_command_at(
    method_list: Sequence[methods.Method], ctx: methods.Context
) -> tuple[int, consolidation.Command] | None:
    """`first_command` with the index of the method that returned it: when its command fails validation, the
    disruption loop asks the methods after it in the same pass."""
    for index, method in enumerate(method_list):
        start = ctx.clock.now()
        command = method.compute(ctx)
        ctx.observer.evaluated(method, ctx, ctx.clock.now() - start)
        if command is not None:
            return index, command
    return None
