"""The disruption loop (core: disruption/controller.go): a singleton that, every 10 s while idle and only once the
cluster state is synced, strips stale disruption marks, builds candidates, asks the methods in order for a command,
validates it, and hands it to the orchestration queue — or, in dry-run mode, only logs what it would do.
Expiration is not here (it is forceful and unbudgeted: the NodeClaim lifecycle controller owns it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from karpy import backoff, events, rejections
from karpy import clock as clock_mod
from karpy.api import nodepool
from karpy.cloudprovider import errors as cloud_errors
from karpy.cloudprovider import types
from karpy.disruption import budgets, candidates, consolidation, methods, orchestration, simulation, validation
from karpy.kube import client as kube
from karpy.kube import resources
from karpy.provisioning import snapshot as provisioning_snapshot
from karpy.scheduling import nodes, pods, preferences, results, scheduler, volumes
from karpy.state import facts, statenode

log = logging.getLogger(__name__)

POLL = 10.0
"""Seconds between passes when the last one found nothing to do (upstream pollingPeriod)."""
QUEUE_POLL = 1.0
"""Seconds between checks of queued commands' replacements."""
ERROR_BACKOFF_START = 1.0
"""Seconds before retrying a failed pass; doubles with each consecutive failure."""
ERROR_BACKOFF_MAX = 60.0
"""Longest wait between failed passes: an outage is retried at least once a minute."""


def _ignore(*_: Any) -> None:
    return None


class ClusterView(Protocol):
    @property
    def seq(self) -> int:
        """Moves with every change of the cluster state as of now (the methods' "nothing to do" memo key)."""
        ...

    def synced(self) -> bool: ...
    def launches_resolved(self) -> bool: ...
    def nodepools(self) -> list[nodepool.NodePool]: ...
    def nodepool(self, name: str) -> nodepool.NodePool | None: ...
    def state_nodes(self) -> list[statenode.StateNode]: ...
    def pending_pods(self) -> list[pods.Pod]: ...
    def daemonsets(self) -> list[pods.Pod]: ...
    def volumes(self) -> volumes.VolumeCatalog: ...
    def pdbs(self) -> list[dict[str, Any]]: ...
    def objects(self, res: resources.Resource) -> list[Mapping[str, Any]]: ...
    def mark_for_deletion(self, *names: str) -> None: ...
    def unmark_for_deletion(self, *names: str) -> None: ...
    def record_created(self, res: resources.Resource, obj: Mapping[str, Any]) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    dry_run: bool = False
    """Log decisions ("disrupting nodeclaim(s)") without tainting, launching or deleting anything."""
    spot_to_spot: bool = False
    """Feature gate SpotToSpotConsolidation (alpha upstream, off): let consolidation replace spot with spot."""
    poll: float = POLL
    validation_delay: float = validation.VALIDATION_DELAY
    preference_policy: str = preferences.POLICY_RESPECT
    """PREFERENCE_POLICY, Respect|Ignore, default Respect: simulations must relax preferences exactly as the
    provisioner will when it launches the replacement, or a decision rests on a placement that never happens."""
    min_values_policy: str = nodes.MIN_VALUES_STRICT
    """MIN_VALUES_POLICY, Strict|BestEffort, default Strict: as the provisioner's, for the same reason."""


@dataclasses.dataclass(frozen=True, slots=True)
class Metrics:
    """Hooks the operator binds to Prometheus; no-ops by default."""

    decision: Callable[[str, str, str], None] = _ignore
    """(method, reason, decision "delete"|"replace") for every command acted on (or logged in dry-run)."""
    eligible_nodes: Callable[[str, int], None] = _ignore
    """(disruption class, number of candidates) every pass (gauge)."""
    replacement_created: Callable[[str, str], None] = _ignore
    """(nodepool, disruption reason) for every replacement NodeClaim the queue creates."""
    disrupted: Callable[[str, str, str], None] = _ignore
    """(disruption reason, nodepool, capacity type) for every candidate NodeClaim the queue deletes."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    client: kube.KubeClient
    cluster: ClusterView
    cloud: types.CloudProvider
    clock: clock_mod.Clock
    recorder: events.Recorder
    settings: Settings = dataclasses.field(default_factory=Settings)
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve
    rejections: rejections.Sink = dataclasses.field(default_factory=rejections.Discard)
    """Where a node whose evaluation raised is reported; it is left out of the pass, the others are not."""


FAILED_SIMULATION = "<simulation>"
"""The key under which a simulation that raised reports its failure: never "all scheduled"."""


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
        self.queue = orchestration.Queue(
            client=deps.client,
            cluster=deps.cluster,
            clock=deps.clock,
            recorder=deps.recorder,
            replacement_created=deps.metrics.replacement_created,
            disrupted=deps.metrics.disrupted,
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
        if await self.reconcile() is None:
            await self._deps.clock.sleep(self._deps.settings.poll)

    async def _queue_pass(self) -> None:
        await self.queue.reconcile()
        await self._deps.clock.sleep(QUEUE_POLL)

    async def reconcile(self) -> consolidation.Command | None:
        """One pass: the command acted on (or, in dry-run, that would have been), else None."""
        deps = self._deps
        if not deps.cluster.synced() or not deps.cluster.launches_resolved():
            # A replacement still launching holds no capacity yet: simulating now would buy it a second time.
            return None
        if not deps.settings.dry_run:
            await self.queue.strip_stale(deps.cluster.state_nodes())
        ctx = await self.context()
        command = next((c for m in self.methods if (c := m.compute(ctx)) is not None), None)
        if command is None:
            return None
        why = await validation.validate_later(
            command, clock=deps.clock, rebuild=self.context, delay=deps.settings.validation_delay
        )
        if why is not None:
            log.info("abandoning disruption command: %s", why, extra=describe(command))
            return None
        log.info("disrupting nodeclaim(s)%s", " (dry run)" if deps.settings.dry_run else "", extra=describe(command))
        deps.metrics.decision(command.method, str(command.reason), command.decision)
        if not deps.settings.dry_run:
            await self.queue.start(command)
        return command

    async def context(self) -> methods.Context:
        """A fresh snapshot of candidates, budgets and a simulation function."""
        deps = self._deps
        now = deps.clock.now()
        pools = deps.cluster.nodepools()
        listed = {p.name: await self._instance_types(p) for p in pools}
        instance_types = {name: types_ for name, types_ in listed.items() if types_ is not None}
        seq = deps.cluster.seq
        if len(instance_types) < len(pools):
            # A pass that could not see every pool must not be remembered as "nothing to do" at this `seq`: the
            # next one may see them with nothing else changed. A seq no pass ever takes again is never matched.
            self._partial_passes += 1
            seq = -self._partial_passes
        state_nodes = deps.cluster.state_nodes()
        raw_pods = {facts.key(o): o for o in deps.cluster.objects(resources.PODS)}
        pdbs = [p for p in (candidates.pdb_from_manifest(o) for o in deps.cluster.pdbs()) if p is not None]
        build = functools.partial(
            candidates.new_candidate,
            pools={p.name: p for p in pools},
            instance_types=instance_types,
            raw_pods=raw_pods,
            pdbs=pdbs,
            now=now,
            queued=self.queue.names(),
        )
        found: dict[candidates.DisruptionClass, list[candidates.Candidate]] = {}
        for kind in candidates.DisruptionClass:
            built = (self._candidate(build, n, kind) for n in state_nodes)
            found[kind] = [c for c in built if isinstance(c, candidates.Candidate)]
            deps.metrics.eligible_nodes(str(kind), len(found[kind]))
        snap = simulation.Snapshot(
            pools=pools,
            instance_types=instance_types,
            nodes=state_nodes,
            pending=deps.cluster.pending_pods(),
            daemonsets=deps.cluster.daemonsets(),
            volumes=deps.cluster.volumes(),
            settling=simulation.settling_nodes(state_nodes, pools, now=now),
        )
        options = provisioning_snapshot.SchedulingOptions(
            preference_policy=deps.settings.preference_policy, min_values_policy=deps.settings.min_values_policy
        )
        return methods.Context(
            clock=deps.clock,
            seq=seq,
            graceful=found[candidates.DisruptionClass.GRACEFUL],
            eventual=found[candidates.DisruptionClass.EVENTUAL],
            budgets={r: budgets.budget_mapping(pools, state_nodes, r, now=now) for r in nodepool.DisruptionReason},
            simulate=self._guarded(functools.partial(simulation.simulate, snap, solver=deps.solver, options=options)),
            spot_to_spot=deps.settings.spot_to_spot,
            unconsolidatable=self._unconsolidatable,
        )

    async def _instance_types(self, pool: nodepool.NodePool) -> list[types.InstanceType] | None:
        """The pool's catalog; None (its nodes are no candidates this pass) when the cloud cannot tell now."""
        try:
            return list(await self._deps.cloud.instance_types(pool))
        except cloud_errors.CloudProviderError as error:
            # upstream (disruption/helpers.go BuildNodePoolMap): its nodes are not handled; the others are
            log.error("failed listing instance types", extra={"nodepool": pool.name, "error": str(error)})
            return None

    def _candidate(
        self,
        build: Callable[..., candidates.Candidate | candidates.Rejection],
        node: statenode.StateNode,
        kind: candidates.DisruptionClass,
    ) -> candidates.Candidate | candidates.Rejection | None:
        """A candidate, or why not; None when evaluating the node raised (reported, and left alone)."""
        try:
            return build(node, disruption_class=kind)
        except Exception as exc:
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
            return None

    def _guarded(self, simulate: simulation.Simulate) -> simulation.Simulate:
        """`simulate` that never raises: a simulation that fails disrupts nothing (never "all scheduled")."""

        def run(chosen: Sequence[candidates.Candidate], /, *, consolidation: bool = True) -> simulation.Simulation:
            try:
                return simulate(chosen, consolidation=consolidation)
            except Exception as exc:
                log.exception(
                    "disruption simulation raised; the candidates stay", extra={"nodeclaims": [c.name for c in chosen]}
                )
                return simulation.Simulation(
                    replacements=(), unschedulable={FAILED_SIMULATION: f"{type(exc).__name__}: {exc}"}
                )

        return run

    def _unconsolidatable(self, candidate: candidates.Candidate, reason: str) -> None:
        """Tell both objects, as upstream does: users look at `kubectl describe` of either the Node or the NodeClaim."""
        recorder = self._deps.recorder
        if candidate.node.node is not None:
            recorder.record(candidate.node.node, "Normal", "Unconsolidatable", reason)
        recorder.record(orchestration.claim_ref(candidate.claim), "Normal", "Unconsolidatable", reason)
