"""The provisioning loop (core: pkg/controllers/provisioning/provisioner.go): batch → synced → snapshot → solve →
create NodeClaims → nominate → events. Decisions live in `snapshot`, `nodeclaims`, `limits` and `podevents`; this
module only sequences them and does the I/O.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from typing import Any

from karpy import backoff, events, rejections, tasks
from karpy import settings as karpy_settings
from karpy.api import hashing, labels, nodepool
from karpy.clock import Clock
from karpy.cloudprovider import errors, types
from karpy.kube import client, resources
from karpy.provisioning import (
    batcher,
    isolation,
    limits,
    nodeclaim_builder,
    podevents,
    podtimes,
    poolevents,
    snapshot,
)
from karpy.scheduling import pods, results, scheduler
from karpy.state import cluster as state_cluster
from karpy.state import virtualpods

log = logging.getLogger(__name__)

SOLVE_TIMEOUT = 60.0
"""Seconds a scheduling simulation may take (upstream Solve() deadline)."""
MIN_NOMINATION_WINDOW = 10.0
"""Lower bound of how long a nominated node is protected from disruption (statenode.go `nominationWindow`)."""
PENDING_RESCAN = 10.0
"""Seconds between re-triggers for pods that are still pending (upstream requeues provisionable pods every 10 s)."""
SYNC_POLL = 1.0
"""Seconds between checks while waiting for the cluster state to finish its first LISTs."""
ERROR_BACKOFF = 5.0
"""Seconds to wait after a provisioning pass failed unexpectedly before the next one."""
MAX_PARALLEL_CREATES = 1000
"""NodeClaim creations in flight at once. Upstream creates every NodeClaim of a pass at once
(provisioner.go CreateNodeClaims: ParallelizeUntil with one worker per claim) and lets the client's QPS limit pace
them (KUBE_CLIENT_QPS/BURST, here too): a pass's creates then reach the lifecycle controller, and its launches the
CreateFleet batcher, together rather than over several 1 s windows."""
LOGGED_NAMES = 5
"""Names a log field lists before "and N other(s)" (upstream pretty.Slice(..., 5))."""
LIMITS_EXCEEDED = "limits_exceeded"
API_ERROR = "api_error"
"""Why a NodeClaim could not be created (the reason of the create-failed hook)."""


def nomination_window(batch_max_duration: float) -> float:
    return max(2 * batch_max_duration, MIN_NOMINATION_WINDOW)


class Metrics:
    """What the provisioner counts, by name: the operator's subclass binds its Prometheus series
    (`karpy.runtime.metrics.scheduler`); this one counts nothing."""

    def scheduling_duration(self, seconds: float) -> None:
        """Seconds one Solve took (histogram)."""

    def nodeclaim_created(self, pool: str, min_values_relaxed: bool) -> None:
        """A NodeClaim created for `pool`, and whether minValues was relaxed for it (counter)."""

    def nodeclaim_create_failed(self, pool: str, reason: str) -> None:
        """A create refused or failed, for LIMITS_EXCEEDED or API_ERROR (counter)."""

    def pods_unschedulable(self, count: int) -> None:
        """How many pods the last batch could not place (gauge)."""

    def pods_ignored(self, count: int) -> None:
        """How many pending pods the last batch refused outright: unsupported constraints, or DRA requests while
        IGNORE_DRA_REQUESTS is on (core: provisioning/provisioner.go `Validate`,
        karpenter_scheduler_ignored_pods_count)."""

    def solve_started(self, scheduling_id: str, pods: int, start: float) -> None:
        """A solve of `pods` queued pods started at `start` (karpenter_scheduler_queue_depth and
        _unfinished_work_seconds, while it runs)."""

    def solve_finished(self, scheduling_id: str) -> None:
        """That solve ended, however."""

    def pending_by_effective_zone(self, counts: Mapping[str, int]) -> None:
        """Pending pods (not those of leaving nodes) per effective zone of the last solve, replacing the previous
        counts (core: scheduling/scheduler.go Solve resets karpenter_scheduler_pending_pods_by_effective_zone_count
        and sets it from the zones computeEffectiveZoneFromPod gave at the start of the solve)."""

    def pod_decided(self, seconds: float) -> None:
        """Seconds from the provisioner's first sight of a pending pod to the first solve that placed it or could not
        (karpenter_pods_scheduling_decision_duration_seconds)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    window: batcher.WindowSettings = dataclasses.field(default_factory=batcher.WindowSettings)
    scheduling: karpy_settings.SchedulingSettings = dataclasses.field(default_factory=karpy_settings.SchedulingSettings)
    solve_timeout: float = SOLVE_TIMEOUT
    max_parallel_creates: int = MAX_PARALLEL_CREATES


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The provisioner's collaborators: disruption's roles, but its own Settings and Metrics."""

    client: client.KubeClient
    cluster: state_cluster.Cluster
    cloud: types.CloudProvider
    clock: Clock
    recorder: events.Recorder
    rejections: rejections.Sink
    """Where pods the scheduling simulation fails on are reported (they are set aside; the others are placed)."""
    settings: Settings = dataclasses.field(default_factory=Settings)
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve
    buffer_pods: Callable[[], Sequence[pods.Pod]] = tuple
    """The CapacityBuffers' virtual pods, scheduled with the pending ones so their room is launched (CapacityBuffer
    gate; core: provisioning/provisioner.go GetPendingPods). They get no nomination, event or failure report."""
    observe_plan: Callable[[results.Results], Awaitable[None]] | None = None
    """Told every pass's plan (the buffers' Provisioning condition, the nodes holding their pods)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Created:
    name: str
    nodepool: str
    pods: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What one provisioning pass did."""

    created: tuple[Created, ...] = ()
    nominated: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # node -> pod keys
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)  # pod key -> reason
    solve_timed_out: bool = False


class Provisioner:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self.batcher = batcher.Batcher(deps.clock, settings=deps.settings.window)
        self.pod_times = podtimes.PodTimes(deps.clock)
        """When each pending pod was first seen, decided on and placed (the pod provisioning series read it)."""
        self._last_scan: float | None = None
        self._incompatible = poolevents.IncompatiblePools(deps.recorder)

    def trigger(self, uid: str) -> None:
        """A pod became provisionable (or a node with pods started leaving): open or extend a batch window."""
        self.batcher.trigger(uid)

    async def run(self) -> None:
        """Provision forever; cancel the task to stop. A failed pass is logged and the next one starts after
        ERROR_BACKOFF seconds (pods still pending are re-triggered by the rescan)."""
        await backoff.forever(
            self.reconcile, clock=self._deps.clock, log=log, what="provisioning pass", delay=ERROR_BACKOFF
        )

    async def reconcile(self) -> Outcome | None:
        """One loop turn: None when no batch formed, else the outcome of provisioning it."""
        self._rescan_pending()
        if not await self.batcher.wait():
            return None
        await self._wait_synced()
        return await self.provision()

    async def provision(self) -> Outcome:
        """Schedule every pending pod (plus those on leaving nodes) and act on the plan."""
        deps = self._deps
        cluster = deps.cluster
        state_nodes = list(cluster.state_nodes())  # before the pods: over- rather than under-estimate capacity
        pending = [*snapshot.pending_pods(cluster, state_nodes), *deps.buffer_pods()]
        if not pending:
            return Outcome()
        pools, skipped = snapshot.schedulable_pools(cluster.nodepools())
        for name, why in skipped.items():
            log.debug("ignoring nodepool", extra={"nodepool": name, "reason": why})
        catalog = await self._instance_types(pools)
        self._incompatible.report(pools, catalog)
        inp = snapshot.provisioning_input(
            cluster, state_nodes, pending, instance_types=catalog, options=deps.settings.scheduling
        )
        started = deps.clock.now()
        deps.metrics.pods_ignored(
            sum(1 for p in pending if p.unsupported or (p.dra and deps.settings.scheduling.ignore_dra_requests))
        )
        plan, timed_out = await self._solve(inp)
        leaving = {p.key for p in snapshot.reschedulable_pods(state_nodes)}
        deps.metrics.pending_by_effective_zone(_pending_by_zone(plan, leaving=leaving))
        _log_plan(plan, pending, duration=deps.clock.now() - started)
        if deps.observe_plan is not None:
            await deps.observe_plan(plan)
        created, create_failures = await self.create_nodeclaims(plan.new_nodeclaims, {p.name: p for p in inp.nodepools})
        real = _without_virtual(plan, {p.key for p in pending if virtualpods.is_virtual(p)})
        nominated = self._nominate(real.existing_nodes)
        self._mark_decisions(real, leaving=leaving)
        failed = self._report_failures(pending, real.unschedulable, create_failures)
        deps.metrics.pods_unschedulable(len(failed))
        return Outcome(tuple(created), nominated, failed, timed_out)

    async def create_nodeclaims(
        self, plans: Sequence[results.PlannedNodeClaim], pools: Mapping[str, nodepool.NodePool]
    ) -> tuple[list[Created], list[tuple[results.PlannedNodeClaim, str]]]:
        """Create one NodeClaim per plan, limits re-checked right before each; returns the created claims and the
        refused or failed plans with why. Also usable by disruption for replacements."""
        deps = self._deps
        limit = asyncio.Semaphore(max(1, deps.settings.max_parallel_creates))
        failures: list[tuple[results.PlannedNodeClaim, str]] = []
        created: list[Created] = []

        async def create(plan: results.PlannedNodeClaim, pool: nodepool.NodePool) -> None:
            async with limit:
                try:
                    made = await deps.client.create(resources.NODECLAIMS, self._manifest(plan, pool))
                except (client.KubeError, OSError, TimeoutError) as exc:  # API refusal or transport failure
                    # The error in the message too: a plain formatter (not `karpy run`'s JSON) drops the extras.
                    log.error(
                        "creating nodeclaim failed: %s: %s",
                        type(exc).__name__,
                        exc,
                        extra={"nodepool": pool.name, "error": str(exc)},
                    )
                    deps.metrics.nodeclaim_create_failed(pool.name, API_ERROR)
                    failures.append((plan, f"creating nodeclaim, {exc}"))
                    return
                except Exception as exc:  # building it raised: this claim fails, the others are still created
                    log.exception("building nodeclaim failed", extra={"nodepool": pool.name})
                    deps.metrics.nodeclaim_create_failed(pool.name, API_ERROR)
                    failures.append((plan, f"building nodeclaim, {type(exc).__name__}: {exc}"))
                    return
            deps.cluster.record_created(resources.NODECLAIMS, made)  # in-flight before its watch event arrives
            meta_ = made.get("metadata") or {}
            name = str(meta_.get("name") or meta_.get("generateName") or f"{pool.name}-")
            log.info(
                "created nodeclaim",
                extra={
                    "nodeclaim": name,
                    "nodepool": pool.name,
                    "requests": dict(plan.requests),
                    "instance-types": _instance_types_summary(plan),
                },
            )
            deps.metrics.nodeclaim_created(pool.name, plan.min_values_relaxed)
            real = [p for p in plan.pods if not virtualpods.is_virtual(p)]
            created.append(Created(name, pool.name, tuple(p.key for p in real)))
            for p in real:
                self._record(podevents.nominated(p, nodeclaim=name))

        # Sequential admission, parallel creation: each decision sees the claims admitted before it.
        allowed, refused = limits.admit(plans, pools, deps.cluster.nodepool_usage)
        for no in refused:
            failures.append((no.plan, no.reason))
            if no.limited:
                log.error(
                    "creating nodeclaim refused by nodepool limits",
                    extra={"nodepool": no.plan.nodepool, "reason": no.reason},
                )
                deps.metrics.nodeclaim_create_failed(no.plan.nodepool, LIMITS_EXCEEDED)
        tasks = [asyncio.ensure_future(create(plan, pool)) for plan, pool in allowed]
        if tasks:
            await asyncio.gather(*tasks)
        return created, failures

    def _manifest(self, plan: results.PlannedNodeClaim, pool: nodepool.NodePool) -> dict[str, Any]:
        nodeclass_hash = None
        ref = pool.template.node_class_ref
        if ref.group == labels.AWS_GROUP:
            nodeclass = self._deps.cluster.nodeclasses().get(ref.name)
            nodeclass_hash = hashing.ec2nodeclass_hash(nodeclass) if nodeclass is not None else None
        return nodeclaim_builder.build_nodeclaim(plan, pool, nodeclass_hash=nodeclass_hash)

    def _mark_decisions(self, plan: results.Results, *, leaving: Set[str]) -> None:
        """Record the solve's decision on each pending pod; pods of leaving nodes are bound already and not timed
        (core: state/cluster.go MarkPodSchedulingDecisions skips scheduled pods)."""
        placed = [p.key for c in plan.new_nodeclaims for p in c.pods]
        placed += [p.key for on_node in plan.existing_nodes.values() for p in on_node]
        waits = self.pod_times.decided(
            failed=[k for k in plan.unschedulable if k not in leaving], placed=[k for k in placed if k not in leaving]
        )
        for seconds in waits:
            self._deps.metrics.pod_decided(seconds)

    def _nominate(self, placements: Mapping[str, Sequence[pods.Pod]]) -> dict[str, tuple[str, ...]]:
        deps = self._deps
        until = deps.clock.now() + nomination_window(deps.settings.window.max_duration)
        out: dict[str, tuple[str, ...]] = {}
        for node, placed in placements.items():
            if not placed:
                continue
            deps.cluster.nominate(node, until)
            out[node] = tuple(p.key for p in placed)
            for p in placed:
                self._record(podevents.nominated(p, node=node))
        return out

    def _report_failures(
        self,
        pending: Sequence[pods.Pod],
        unschedulable: Mapping[str, str],
        create_failures: Sequence[tuple[results.PlannedNodeClaim, str]],
    ) -> dict[str, str]:
        by_key = {p.key: p for p in pending}
        failed = dict(unschedulable)
        for plan, why in create_failures:
            failed.update({p.key: why for p in plan.pods if not virtualpods.is_virtual(p)})
        for key, why in failed.items():
            if key in by_key:
                self._record(podevents.failed_scheduling(by_key[key], why))
        if failed:
            log.warning("could not schedule pod(s)", extra={"pods": len(failed), "reasons": _first_reasons(failed)})
        return failed

    async def _instance_types(self, pools: Sequence[nodepool.NodePool]) -> dict[str, Sequence[types.InstanceType]]:
        out: dict[str, Sequence[types.InstanceType]] = {}
        for pool in pools:
            try:
                out[pool.name] = await self._deps.cloud.instance_types(pool)
            except (errors.NodeClassNotReady, errors.UnevaluatedNodePool) as exc:  # expected while a new one resolves
                log.warning(_UNRESOLVED, type(exc).__name__, exc, extra={"nodepool": pool.name, "error": str(exc)})
            except errors.CloudProviderError as exc:
                log.error(_UNRESOLVED, type(exc).__name__, exc, extra={"nodepool": pool.name, "error": str(exc)})
        return out

    async def _solve(self, inp: scheduler.SchedulingInput) -> tuple[results.Results, bool]:
        """Run the CPU-bound solve in a worker thread with upstream's deadline: past `solve_timeout` the solve stops
        between runs of pods and its partial plan is used, as upstream uses Solve()'s results on a deadline."""
        deps = self._deps
        start = deps.clock.now()
        timeout = deps.settings.solve_timeout
        bounded = dataclasses.replace(inp, deadline=lambda: deps.clock.now() - start >= timeout)
        scheduling_id = str(uuid.uuid4())  # upstream labels each solve's in-flight gauges with a fresh id
        deps.metrics.solve_started(scheduling_id, len(inp.pods), start)
        try:
            outcome = await asyncio.to_thread(tasks.without_collector(isolation.solve), deps.solver, bounded)
        finally:
            deps.metrics.solve_finished(scheduling_id)
        plan = outcome.results
        for pod in (p for p in inp.pods if p.key in outcome.set_aside):
            deps.rejections.report(
                _pod_ref(pod),
                reason=rejections.Reason.HANDLING_FAILED,
                problem=f"the scheduling simulation raised {outcome.set_aside[pod.key]}; the pod is set aside",
            )
        if plan.timed_out:
            left = sum(1 for why in plan.unschedulable.values() if why == scheduler.TIMED_OUT)
            log.error(
                "scheduling simulation timed out; pods left for the next pass",
                extra={"timeout": timeout, "pods-left": left, "pods": len(inp.pods)},
            )
        deps.metrics.scheduling_duration(deps.clock.now() - start)
        return plan, plan.timed_out

    async def _wait_synced(self) -> None:
        while not self._deps.cluster.synced_for_decisions():
            log.debug("waiting on cluster sync")
            await self._deps.clock.sleep(SYNC_POLL)

    def _rescan_pending(self) -> None:
        """Re-trigger for pods still pending (and pods on leaving nodes) every PENDING_RESCAN seconds."""
        deps = self._deps
        now = deps.clock.now()
        if self._last_scan is not None and now - self._last_scan < PENDING_RESCAN:
            return
        if not deps.cluster.synced_for_decisions():
            return
        self._last_scan = now
        nodes = deps.cluster.state_nodes()
        pending = deps.cluster.pending_pods()
        for p in pending:  # a pod pending since before this replica led was never seen by its watch event
            self.pod_times.seen(p.key)
        self.pod_times.retain({p.key for p in pending} | {p.key for n in nodes for p in n.pods})
        for p in snapshot.merge_pods(pending, snapshot.reschedulable_pods(nodes)):
            self.batcher.trigger(p.uid or p.key)

    def _record(self, event: podevents.PodEvent) -> None:
        self._deps.recorder.record(event.involved_object(), event.type, event.reason, event.message)


_UNRESOLVED = "skipping, unable to resolve instance types: %s: %s"


def _without_virtual(plan: results.Results, virtual: Set[str]) -> results.Results:
    """The plan as the real pods see it: virtual pods are not nominated, timed or reported (core:
    scheduling/scheduler.go nominates real pods only; provisioning/buffers.go filterVirtualPodErrors)."""
    if not virtual:
        return plan
    return dataclasses.replace(
        plan,
        new_nodeclaims=[
            dataclasses.replace(c, pods=tuple(p for p in c.pods if p.key not in virtual)) for c in plan.new_nodeclaims
        ],
        existing_nodes={n: [p for p in placed if p.key not in virtual] for n, placed in plan.existing_nodes.items()},
        unschedulable={k: why for k, why in plan.unschedulable.items() if k not in virtual},
    )


def _pending_by_zone(plan: results.Results, *, leaving: Set[str]) -> dict[str, int]:
    """Pods per effective zone but those of leaving nodes, which are in the solve and not pending (upstream counts
    the solve's Pending pods)."""
    counts = {
        zone: len(placed) - (sum(1 for p in placed if p.key in leaving) if leaving else 0)
        for zone, placed in plan.effective_zones.items()
    }
    return {zone: count for zone, count in counts.items() if count}


def _pod_ref(pod: pods.Pod) -> dict[str, Any]:
    meta = {"name": pod.name, "namespace": pod.namespace, **({"uid": pod.uid} if "/" not in pod.uid else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def _log_plan(plan: results.Results, pending: Sequence[pods.Pod], *, duration: float) -> None:
    """Upstream's lines for a solved batch (core: provisioner.go Schedule, scheduling/results.go Record): only
    batches that buy capacity say "found provisionable pod(s)", so pods that stay unschedulable do not repeat it
    every rescan."""
    if plan.new_nodeclaims:
        log.info(
            "found provisionable pod(s)",
            extra={"pods": _names([p.key for p in pending]), "duration": round(duration, 3)},
        )
        log.info(
            "computed new nodeclaim(s) to fit pod(s)",
            extra={"nodeclaims": len(plan.new_nodeclaims), "pods": sum(len(c.pods) for c in plan.new_nodeclaims)},
        )
    filled = [placed for placed in plan.existing_nodes.values() if placed]
    if filled:
        log.info(
            "computed unready node(s) will fit pod(s)",
            extra={"nodes": len(filled), "pods": sum(len(placed) for placed in filled)},
        )


def _more(items: Sequence[object], shown: int) -> str:
    return f" and {len(items) - shown} other(s)" if len(items) > shown else ""


def _names(names: Sequence[str], shown: int = LOGGED_NAMES) -> str:
    """`a, b, c, d, e and 3 other(s)`: upstream's pretty.Slice form of a long list in a log field."""
    return ", ".join(names[:shown]) + _more(names, shown)


def _instance_types_summary(plan: results.PlannedNodeClaim) -> str:
    return _names([t.name for t in plan.instance_type_options[: results.MAX_INSTANCE_TYPES]])


def _first_reasons(failed: Mapping[str, str], shown: int = 3) -> str:
    items = list(failed.items())
    return "; ".join(f"{k}: {v}" for k, v in items[:shown]) + _more(items, shown)
