"""The orchestration queue (core: disruption/orchestration/queue.go): replace first, then delete.

`start`: taint each candidate Node `karpenter.sh/disrupted:NoSchedule` and set its NodeClaim's DisruptionReason
condition; create the replacement NodeClaims; only then mark the candidates for deletion in the cluster model (so
the provisioner does not launch for their pods a second time). `reconcile`: once every replacement is Initialized,
delete the candidate NodeClaims (termination drains them); if a replacement vanished (e.g. ICE) or the retry window
— clamp(80 ms × queued commands, 10 min, 1 h) — ran out, undo: un-taint, clear the condition, unmark, drop.
`strip_stale`: after a restart the queue is empty, so disrupted taints and DisruptionReason conditions on nodes
that are neither queued nor being deleted are leftovers of a command that never finished; upstream removes them
first in every loop, and so does the controller.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy import clock as karpy_clock
from karpy import events
from karpy.api import labels, meta, nodeclaim, nodepool, parse, status
from karpy.disruption import consolidation
from karpy.disruption import metrics as disruption_metrics
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import conditions
from karpy.provisioning import nodeclaim_builder
from karpy.state import cluster as state_cluster
from karpy.state import facts, statenode

log = logging.getLogger(__name__)

RETRY_PER_COMMAND = 0.08
MIN_RETRY_WINDOW = 600.0
MAX_RETRY_WINDOW = 3600.0
DISRUPTED_TAINT = meta.Taint(labels.TAINT_DISRUPTED_KEY, labels.EFFECT_NO_SCHEDULE)
DISRUPTION_LAUNCHING = "DisruptionLaunching"
DISRUPTION_WAITING_READINESS = "DisruptionWaitingReadiness"
WAITING_READINESS_MESSAGE = "Waiting on readiness to continue disruption"


def launching_message(reason: nodepool.DisruptionReason | None) -> str:
    """core: disruption/events/events.go `Launching` (the reason title-cased, as DisruptionReason values are)."""
    return f"Launching NodeClaim: {reason or ''}"


def retry_window(commands: int) -> float:
    return min(MAX_RETRY_WINDOW, max(MIN_RETRY_WINDOW, RETRY_PER_COMMAND * commands))


def _raw_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, Mapping)]


def taints_patch(node: Mapping[str, Any], *, disrupted: bool) -> dict[str, Any] | None:
    """A merge patch adding or removing the disrupted taint (None when already as wanted). The list is replaced
    whole, so the patch carries the resourceVersion it was computed from."""
    current = _raw_taints(node)
    has = any(t.get("key") == labels.TAINT_DISRUPTED_KEY for t in current)
    if has == disrupted:
        return None
    if disrupted:
        wanted = [*current, {"key": DISRUPTED_TAINT.key, "effect": DISRUPTED_TAINT.effect}]
    else:
        wanted = [t for t in current if t.get("key") != labels.TAINT_DISRUPTED_KEY]
    rv = facts.metadata(node).get("resourceVersion")
    md = {"resourceVersion": rv} if rv else {}
    return {"metadata": md, "spec": {"taints": wanted}}


def reason_conditions(
    claim: nodeclaim.NodeClaim, reason: nodepool.DisruptionReason | None, *, now: float
) -> tuple[meta.Condition, ...]:
    if reason is None:
        return tuple(c for c in claim.status.conditions if c.type != nodeclaim.DISRUPTION_REASON)
    return conditions.set_condition(
        claim.status.conditions, nodeclaim.DISRUPTION_REASON, conditions.TRUE, now=now, reason=str(reason)
    )


@dataclasses.dataclass(slots=True)
class Item:
    command: consolidation.Command
    replacements: list[str]
    deadline: float
    waiting_told: set[str] = dataclasses.field(default_factory=set)
    """Replacements already given their DisruptionWaitingReadiness event (once each, not on every pass)."""
    initialized: set[str] = dataclasses.field(default_factory=set)
    """Replacements seen Initialized (the others count as failed launches when the command is given up)."""


def _initialized(raw: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == nodeclaim.INITIALIZED and c.get("status") == "True"
        for c in (raw.get("status") or {}).get("conditions") or ()
    )


SILENT = disruption_metrics.Metrics()
"""Counts nothing: a queue built without the operator's metrics."""


class Queue:
    def __init__(
        self,
        *,
        client: kube_client.KubeClient,
        cluster: state_cluster.Cluster,
        clock: karpy_clock.Clock,
        recorder: events.Recorder,
        metrics: disruption_metrics.Metrics = SILENT,
    ) -> None:
        self._client = client
        self._cluster = cluster
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        self.items: list[Item] = []

    def names(self) -> frozenset[str]:
        """NodeClaim names of every queued candidate."""
        return frozenset(c.name for item in self.items for c in item.command.candidates)

    async def start(self, command: consolidation.Command) -> None:
        for c in command.candidates:
            await self._mark(c.node_name, c.name, command.reason)
        created: list[str] = []
        try:
            for plan in command.replacements:
                pool = self._cluster.nodepool(plan.nodepool)
                if pool is None:
                    raise LookupError(f"nodepool {plan.nodepool} is gone")
                body = await self._client.create(resources.NODECLAIMS, nodeclaim_builder.build_nodeclaim(plan, pool))
                self._cluster.record_created(resources.NODECLAIMS, body)  # in flight before its watch event arrives
                created.append(str(body["metadata"]["name"]))
                self._metrics.replacement_created(plan.nodepool, str(command.reason), plan.min_values_relaxed)
                self._recorder.record(body, "Normal", DISRUPTION_LAUNCHING, launching_message(command.reason))
        except (kube_client.KubeError, LookupError) as error:
            log.warning("launching replacements failed, abandoning the command: %s", error)
            await self._unmark(command)
            raise
        self._cluster.mark_for_deletion(*_names(command))
        window = retry_window(len(self.items) + 1)
        self.items.append(Item(command, created, self._clock.now() + window))

    async def reconcile(self) -> None:
        """Advance every queued command once; one command failing does not hold up the others."""
        for item in list(self.items):
            try:
                outcome = await self._progress(item)
            except kube_client.KubeError as error:
                log.warning("progressing a disruption command failed; retrying: %s", error)
                continue
            except Exception:  # not an API failure: retrying would fail the same way, so give the command up
                log.exception("progressing a disruption command raised; abandoning it")
                outcome = await self._fail(item, "progressing the command raised")
            if outcome is not None:
                self.items.remove(item)

    async def _progress(self, item: Item) -> str | None:
        ready = True
        for name in item.replacements:
            raw = await self._client.get(resources.NODECLAIMS, name)
            if raw is None or facts.metadata(raw).get("deletionTimestamp"):
                return await self._fail(item, f"replacement nodeclaim {name} was deleted")
            if _initialized(raw):
                item.initialized.add(name)
            else:
                ready = False
                if name not in item.waiting_told:
                    item.waiting_told.add(name)
                    self._recorder.record(raw, "Normal", DISRUPTION_WAITING_READINESS, WAITING_READINESS_MESSAGE)
        if ready:
            for c in item.command.candidates:
                if await self._client.delete(resources.NODECLAIMS, c.name):  # upstream counts at this delete
                    self._metrics.disrupted(
                        str(item.command.reason), c.pool.name, c.capacity_type,
                        # drift flows through this queue too: only a consolidation reports a policy (queue.go)
                        consolidation_policy=str(c.pool.disruption.consolidation_policy)
                        if item.command.reason == nodepool.DisruptionReason.UNDERUTILIZED
                        or item.command.reason == nodepool.DisruptionReason.EMPTY
                        else "",
                        termination_mode=nodeclaim.termination_mode(c.claim),
                        pods=len(c.reschedulable_pods),
                    )  # fmt: skip
                message = f"Disrupting node via {item.command.reason}"
                self._recorder.record(nodeclaim.event_ref(c.claim), "Normal", "DisruptionTerminating", message)
                if c.node.node is not None:
                    self._recorder.record(c.node.node, "Normal", "DisruptionTerminating", message)
            log.info("deleted disrupted nodeclaim(s)", extra={"nodeclaims": [c.name for c in item.command.candidates]})
            return "done"
        if self._clock.now() >= item.deadline:
            return await self._fail(item, "timed out waiting for replacements to initialize")
        return None

    async def _fail(self, item: Item, why: str) -> str:
        log.warning("disruption command failed: %s", why, extra={"replacements": item.replacements})
        command = item.command
        not_ready = len([r for r in item.replacements if r not in item.initialized])
        self._metrics.queue_failed(command.method, str(command.reason), command.decision, not_ready)
        await self._unmark(item.command)
        self._cluster.unmark_for_deletion(*_names(item.command))
        return why

    async def _mark(self, node_name: str, claim_name: str, reason: nodepool.DisruptionReason | None) -> None:
        if node_name:
            node = await self._client.get(resources.NODES, node_name)
            patch = taints_patch(node, disrupted=reason is not None) if node is not None else None
            if patch is not None:
                await self._client.patch(resources.NODES, node_name, patch)
        raw = await self._client.get(resources.NODECLAIMS, claim_name)
        if raw is None:
            return
        claim = parse.nodeclaim(raw)
        wanted = reason_conditions(claim, reason, now=self._clock.now())
        if wanted != claim.status.conditions:
            body = {"status": {"conditions": status.conditions(wanted)}}
            await self._client.patch(resources.NODECLAIMS, claim_name, body, subresource="status")

    async def _unmark(self, command: consolidation.Command) -> None:
        for c in command.candidates:
            try:
                await self._mark(c.node_name, c.name, None)
            except kube_client.NotFound:
                continue

    async def strip_stale(self, nodes: Iterable[statenode.StateNode]) -> int:
        """Remove leftover disruption marks from nodes not queued and not being deleted; returns how many."""
        queued = self.names()
        stripped = 0
        for n in nodes:
            if n.nodeclaim_name in queued or n.deleting or n.marked_for_deletion:
                continue
            tainted = any(t.key == labels.TAINT_DISRUPTED_KEY for t in _node_taints(n))
            conditioned = n.nodeclaim is not None and n.nodeclaim.condition(nodeclaim.DISRUPTION_REASON) is not None
            if tainted or conditioned:
                await self._mark(n.node_name, n.nodeclaim_name, None)
                stripped += 1
        return stripped


def _node_taints(n: statenode.StateNode) -> Sequence[meta.Taint]:
    return facts.node_taints(n.node) if n.node is not None else ()


def _names(command: consolidation.Command) -> list[str]:
    return [name for c in command.candidates for name in (c.name, c.node_name) if name]
