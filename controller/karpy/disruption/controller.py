"""The disruption loop (core: disruption/controller.go): a singleton that, every 10 s while idle and only once the
cluster state is synced, strips stale disruption marks, builds candidates, asks the methods in order for a command,
validates it, and hands it to the orchestration queue — or, in dry-run mode, only logs what it would do. A command
that fails validation ends nothing: the methods after its own are asked in the same pass, as upstream's do.
Expiration is not here (it is forceful and unbudgeted: the NodeClaim lifecycle controller owns it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from karpy import backoff, events, rejections
from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy.api import nodepool
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.disruption import (
    consolidation,
    consolidationevents,
    methods,
    orchestration,
    passes,
    publisher,
    validation,
)
from karpy.disruption import metrics as disruption_metrics
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.scheduling import results, scheduler
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

POLL = 10.0
"""Seconds between passes when the last one found nothing to do (upstream pollingPeriod)."""
SYNC_POLL = 1.0
"""Seconds before looking again while the cluster state is not synced, e.g. a replacement the last command created
has no providerID yet (upstream disruption/controller.go requeues after a second, not after the polling period):
each replace command is followed by such a wait, and a 10 s one would add up over a long consolidation."""
QUEUE_POLL = 1.0
"""Seconds between checks of queued commands' replacements."""
ERROR_BACKOFF_START = 1.0
"""Seconds before retrying a failed pass; doubles with each consecutive failure."""
ERROR_BACKOFF_MAX = 60.0
"""Longest wait between failed passes: an outage is retried at least once a minute."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    dry_run: bool = False
    """Log decisions ("disrupting nodeclaim(s)") without tainting, launching or deleting anything."""
    spot_to_spot: bool = False
    """Feature gate SpotToSpotConsolidation (alpha upstream, off): let consolidation replace spot with spot."""
    poll: float = POLL
    validation_delay: float = validation.VALIDATION_DELAY
    scheduling: karpy_settings.SchedulingSettings = dataclasses.field(default_factory=karpy_settings.SchedulingSettings)
    """The provisioner's own policies: simulations must place pods exactly as the provisioner will when it launches
    the replacement, or a decision rests on a placement that never happens (with DRA requests ignored, a node whose
    pods ask for DRA resources cannot be consolidated, as their pods could not be placed again)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The disruption loop's collaborators: provisioning's roles, but its own Settings and Metrics."""

    client: kube_client.KubeClient
    cluster: state_cluster.Cluster
    cloud: types.CloudProvider
    clock: karpy_clock.Clock
    recorder: events.Recorder
    rejections: rejections.Sink
    """Where a node whose evaluation raised is reported; it is left out of the pass, the others are not."""
    settings: Settings = dataclasses.field(default_factory=Settings)
    metrics: disruption_metrics.Metrics = dataclasses.field(default_factory=disruption_metrics.Metrics)
    solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve


@dataclasses.dataclass(frozen=True, slots=True)
class Pass:
    """What one disruption pass did and when the loop runs the next (upstream's reconcile.Result)."""

    command: consolidation.Command | None
    """The command acted on (or, in dry-run, that would have been); None: nothing to do, or not synced."""
    requeue_after: float
    """Seconds until the next pass: 0 after a command, SYNC_POLL while not synced, else the polling period."""


UNSYNCED = Pass(command=None, requeue_after=SYNC_POLL)
"""A pass that found the cluster state unsynced, at its start or after a rejected command (upstream Reconcile
requeues after a second whenever `cluster.Synced` is false)."""


def describe(command: consolidation.Command) -> dict[str, Any]:
    """The structured fields of the "disrupting nodeclaim(s)" log line."""
    return {
        "method": command.method,
        "reason": str(command.reason),
        "decision": command.decision,
        "nodeclaims": [c.name for c in command.candidates],
        "replacements": [
            sorted(t.name for t in r.instance_type_options)[:5] + (["..."] if len(r.instance_type_options) > 5 else [])
            for r in command.replacements
        ],
        "savings": round(command.savings, 4),
    }


class DisruptionController:
    def __init__(self, deps: Deps, *, method_list: Sequence[methods.Method] | None = None) -> None:
        self._deps = deps
        self.methods = list(method_list) if method_list is not None else methods.default_methods()
        self._partial_passes = 0
        self._publisher = publisher.Publisher(deps.recorder, deps.metrics)
        self.queue = orchestration.Queue(
            client=deps.client,
            cluster=deps.cluster,
            clock=deps.clock,
            recorder=deps.recorder,
            metrics=deps.metrics,
        )

    async def run(self) -> None:
        """Disrupt and progress the queue forever; cancel to stop. A failed pass (API server or cloud provider
        outage, a refused write) must not end the controller: it is retried after an exponential backoff."""
        retry = functools.partial(
            backoff.forever, clock=self._deps.clock, log=log, delay=ERROR_BACKOFF_START, max_delay=ERROR_BACKOFF_MAX
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(retry(self._queue_pass, what="disruption queue pass"))
            await retry(self._disruption_pass, what="disruption pass")

    async def _disruption_pass(self) -> None:
        done = await self.reconcile()
        if done.requeue_after:
            await self._deps.clock.sleep(done.requeue_after)

    async def _queue_pass(self) -> None:
        await self.queue.reconcile()
        await self._deps.clock.sleep(QUEUE_POLL)

    async def reconcile(self) -> Pass:
        """One pass, and when the next one is due (core: disruption/controller.go `Reconcile`)."""
        if not self._deps.cluster.synced_for_decisions():
            # A replacement still launching holds no capacity yet: simulating now would buy it a second time.
            return UNSYNCED
        return await self._disrupt()

    async def _disrupt(self) -> Pass:
        """The methods' first command that passes validation, acted on (or, in dry-run, not), with the next pass at
        once; else no command, and the next pass after the poll (after SYNC_POLL if the cluster went unsynced)."""
        deps = self._deps
        if not deps.settings.dry_run:
            await self.queue.strip_stale(deps.cluster.state_nodes())
        ctx = await self.context()
        self._report_failed(ctx)
        self._publisher.blocked(ctx)
        remaining: Sequence[methods.Method] = self.methods
        while (found := passes.first_command_at(remaining, ctx)) is not None:
            index, command = found
            self._publisher.announce(
                command, consolidationevents.CONSOLIDATION_CANDIDATE, consolidationevents.candidate_message
            )
            verdict, ctx = await validation.validate_later(
                command, clock=deps.clock, rebuild=self.context, delay=deps.settings.validation_delay
            )
            if not isinstance(verdict, validation.Invalid):
                return Pass(command=await self._act(verdict), requeue_after=0.0)
            self._rejected(command, verdict)
            # A rejected command is a method that did nothing: upstream's Reconcile (disruption/controller.go) goes
            # on to the next methods at once, on the state the validation saw, rather than waiting for a poll.
            remaining = remaining[index + 1 :]
            if not deps.cluster.synced_for_decisions():
                return UNSYNCED  # as at the start of a pass: a launch in flight holds no capacity in a simulation
        return Pass(command=None, requeue_after=deps.settings.poll)

    def _rejected(self, command: consolidation.Command, why: validation.Invalid) -> None:
        log.info("abandoning disruption command: %s", why, extra=describe(command))
        self._deps.metrics.failed_validation(command.method, len(command.candidates))
        self._publisher.announce(
            command,
            consolidationevents.CONSOLIDATION_REJECTED,
            lambda cmd, candidate: consolidationevents.rejected_message(cmd, candidate, why),
        )

    async def _act(self, command: consolidation.Command) -> consolidation.Command:
        """Start a validated command (in dry-run, only log it)."""
        deps = self._deps
        log.info("disrupting nodeclaim(s)%s", " (dry run)" if deps.settings.dry_run else "", extra=describe(command))
        deps.metrics.decision(command.method, str(command.reason), command.decision)
        for pool in dict.fromkeys(c.pool.name for c in command.candidates):
            deps.metrics.pool_decision(pool, command.method, str(command.reason), command.decision)
        if not deps.settings.dry_run:
            await self.queue.start(command)
        return command

    async def context(self) -> methods.Context:
        """A fresh snapshot of candidates, budgets and a simulation function."""
        deps = self._deps
        pools = deps.cluster.nodepools()
        listed = {p.name: await self._instance_types(p) for p in pools}
        instance_types = {name: types_ for name, types_ in listed.items() if types_ is not None}
        seq = deps.cluster.seq
        if len(instance_types) < len(pools):
            # A pass that could not see every pool must not be remembered as "nothing to do" at this `seq`: the
            # next one may see them with nothing else changed. A seq no pass ever takes again is never matched.
            self._partial_passes += 1
            seq = -self._partial_passes
        ctx = passes.context(
            deps.cluster,
            instance_types,
            clock=deps.clock,
            queued=self.queue.names(),
            options=passes.Options(
                spot_to_spot=deps.settings.spot_to_spot,
                scheduling=deps.settings.scheduling,
            ),
            solver=deps.solver,
            observer=self._publisher,
            seq=seq,
        )
        return ctx

    async def _instance_types(self, pool: nodepool.NodePool) -> list[types.InstanceType] | None:
        """The pool's catalog; None (its nodes are no candidates this pass) when the cloud cannot tell now."""
        try:
            return list(await self._deps.cloud.instance_types(pool))
        except cloudprovider_errors.CloudProviderError as error:
            # upstream (disruption/helpers.go BuildNodePoolMap): its nodes are not handled; the others are
            log.error(
                "failed listing instance types: %s: %s",
                type(error).__name__,
                error,
                extra={"nodepool": pool.name, "error": str(error)},
            )
            return None

    def _report_failed(self, ctx: methods.Context) -> None:
        """Nodes whose evaluation raised are left out of the pass, and reported (the others are not held up)."""
        for node, exc in ctx.failed:
            about = (
                rejections.about(resources.NODES, node.node)
                if node.node is not None
                else rejections.about(resources.NODECLAIMS, name=node.nodeclaim_name)
            )
            self._deps.rejections.report(
                about,
                reason=rejections.Reason.HANDLING_FAILED,
                problem=f"evaluating it for disruption raised {type(exc).__name__}: {exc}",
                exc=exc,
            )
