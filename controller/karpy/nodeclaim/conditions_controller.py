"""The NodeClaim disruption-conditions reconciler (core: nodeclaim/disruption + nodeclaim/podevents): keeps each
NodeClaim's `Consolidatable` and `Drifted` conditions and its `status.lastPodEventTime` up to date.

A thin async shell around `conditions`: it reads the claim and its NodePool from the cluster state (no GET, no
parse), asks the cloud only what the cheap checks could not answer (catalogue every 30 min, provider drift last),
and writes the status subresource only when something changed, guarded by the claim's resourceVersion (a stale
read gets a 409 and a quick retry instead of clobbering the lifecycle controller's conditions).

Pod events reach it through `Cluster.add_listener`: `observe` keeps, per node, the latest event time
`disruption_conditions.pod_event_time` accepted. A write that would only move lastPodEventTime waits until the claim's
previous write is `POD_EVENT_SPACING` old, so pod churn on a node costs at most one write per 10 s; any other
change writes at once and carries the pending time with it, so Consolidatable never flips on a stale time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from karpy.api import decoding, labels, nodeclaim, nodepool, status
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import disruption_conditions, roles, written

log = logging.getLogger(__name__)

POLL: Final = 1.0
"""Seconds between `run` passes over the cluster state (new claims, changed claims or pools, pod events)."""
CONFLICT_RETRY: Final = 1.0
ERROR_BACKOFF: Final = 10.0
FAILED_BACKOFF: Final = 300.0
"""Seconds before a claim whose reconcile raised (not an API or cloud failure) is looked at again."""
POD_EVENT_SPACING: Final = 10.0
"""Minimum seconds between two writes of one claim that only move lastPodEventTime."""
CONCURRENCY: Final = 10
"""Claims reconciled at once by `run` (upstream: MaxConcurrentReconciles 10)."""


class Metrics:
    """What the conditions reconciler counts, by name; the operator's subclass binds it to its series
    (`karpy.runtime.metrics.lifecycle`); this one counts nothing."""

    def drifted(self, reason: str, nodepool: str) -> None:
        """A claim became Drifted (karpy_nodeclaims_drifted_total; upstream v1 has no such series and counts drift
        in karpenter_nodeclaims_disrupted_total)."""


@dataclasses.dataclass(slots=True)
class _Memory:
    """Per-claim bookkeeping that only saves work: losing it (restart) costs one extra check or write."""

    catalog_checked: float | None = None
    catalog_missing: bool = False
    written: float | None = None


class NodeClaimConditionsController:
    """It writes conditions only, so it tells nothing but its drift count (`metrics`): no event recorder."""

    def __init__(
        self,
        deps: roles.ClusterRoles,
        cloud: types.CloudProvider,
        *,
        metrics: Metrics,
        own_writes: written.Written,
    ) -> None:
        self._deps = deps
        self._cloud = cloud
        self._metrics = metrics
        # Shared with the lifecycle reconciler (karpy.wiring): a claim the cache holds older than either's last write
        # is waited for, not acted on (`written`).
        self._own_writes = own_writes
        self._pod_events: dict[str, float] = {}  # node name -> latest accepted pod event time
        self._memory: dict[str, _Memory] = {}

    # --- inputs -------------------------------------------------------------------------------------------------

    def observe(self, res: resources.Resource, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """A `state.Cluster` listener: remember pod changes that move a node's lastPodEventTime."""
        if res != resources.PODS:
            return
        event = disruption_conditions.pod_event_time(old, new, now=self._deps.clock.now())
        if event is not None and event.at > self._pod_events.get(event.node_name, -math.inf):
            self._pod_events[event.node_name] = event.at

    def pending_pod_event(self, node_name: str) -> float | None:
        return self._pod_events.get(node_name) if node_name else None

    def route_pod_events(self, claims: Iterable[nodeclaim.NodeClaim]) -> set[str]:
        """Names of the claims whose node has a pending pod event; events of other nodes are dropped (not a claim's
        node: upstream ignores those pods too). `run` calls it every pass; a work-queue wiring should as well."""
        by_node = {c.status.node_name: c.name for c in claims if c.status.node_name}
        owners: set[str] = set()
        for node_name in list(self._pod_events):
            owner = by_node.get(node_name)
            if owner is None:
                del self._pod_events[node_name]
            else:
                owners.add(owner)
        return owners

    # --- reconcile ----------------------------------------------------------------------------------------------

    async def reconcile(self, name: str) -> float | None:
        """Bring one claim's conditions up to date; seconds until it should be looked at again (None: on change)."""
        try:
            return await self._reconcile(name)
        except kube_client.NotFound:
            self.forget(name)
            return None
        except kube_client.Conflict:
            return CONFLICT_RETRY

    async def _reconcile(self, name: str) -> float | None:
        deps = self._deps
        # The claim as the state cache holds it, already parsed (upstream reads its informer cache,
        # pkg/controllers/nodeclaim/disruption/controller.go); the write below carries its resourceVersion, so a read
        # that lags the API server gets 409 and is looked at again instead of writing over a newer claim.
        claim = deps.cluster.nodeclaim(name)
        if claim is None:
            self._own_writes.forget(name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            self.forget(name)
            return None
        if self._own_writes.stale(name, claim.metadata.resource_version):
            return None  # its newer resourceVersion, once cached, makes the next pass look at it again
        pool = deps.cluster.nodepool(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))
        if pool is None:
            return None  # not ours, or its pool is gone: nothing to compare against (upstream leaves it alone)
        now = deps.clock.now()
        memory = self._memory.setdefault(name, _Memory())
        last_event = _latest(claim.status.last_pod_event_time, self.pending_pod_event(claim.status.node_name))
        updated = dataclasses.replace(claim, status=dataclasses.replace(claim.status, last_pod_event_time=last_event))
        drift = await self._drift(updated, pool, memory, now=now)
        new_conditions = disruption_conditions.with_disruption_conditions(updated, pool, now=now, provider_drift=drift)
        updated = dataclasses.replace(updated, status=dataclasses.replace(updated.status, conditions=new_conditions))

        waits = [disruption_conditions.requeue_after(updated, pool, now=now)]
        if claim.is_true(nodeclaim.LAUNCHED):
            due = disruption_conditions.instance_type_check_due(claim, now=now, last_check=memory.catalog_checked)
            if due is not None:
                waits.append(max(due, ERROR_BACKOFF))
        conditions_changed = new_conditions != claim.status.conditions
        event_moved = last_event != claim.status.last_pod_event_time
        if conditions_changed or event_moved:
            spacing = 0.0 if memory.written is None else memory.written + POD_EVENT_SPACING - now
            if conditions_changed or spacing <= 0:
                await self._write(claim, updated)
                memory.written = now
                # Only what was written is settled: an event observed while we awaited stays pending.
                latest = self._pod_events.get(claim.status.node_name)
                if latest is not None and last_event is not None and latest <= last_event:
                    del self._pod_events[claim.status.node_name]
                _log_changes(claim, updated)
                if updated.is_true(nodeclaim.DRIFTED) and not claim.is_true(nodeclaim.DRIFTED):
                    self._metrics.drifted(drift or "", pool.metadata.name)
            else:
                waits.append(spacing)
        return min(waits)

    async def _drift(
        self, claim: nodeclaim.NodeClaim, pool: nodepool.NodePool, memory: _Memory, *, now: float
    ) -> str | None:
        """Why the claim drifted, in upstream's order; None when it has not (or is not Launched)."""
        if not claim.is_true(nodeclaim.LAUNCHED):
            return None
        static = disruption_conditions.static_drift(claim, pool)
        if static is not None:
            return str(static)
        due = disruption_conditions.instance_type_check_due(claim, now=now, last_check=memory.catalog_checked)
        if due == 0.0:
            try:
                catalog = await self._cloud.instance_types(pool)
            except cloudprovider_errors.CloudProviderError as error:
                log.warning("listing instance types for drift failed: %s", error, extra={"nodeclaim": claim.name})
            else:
                memory.catalog_checked = now
                memory.catalog_missing = disruption_conditions.instance_type_missing(claim, catalog)
        if memory.catalog_missing:
            return str(disruption_conditions.CoreDriftReason.INSTANCE_TYPE_NOT_FOUND)
        try:
            reason = await self._cloud.is_drifted(claim)
        except cloudprovider_errors.CloudProviderError as error:
            # Unknown is not "not drifted": keep whatever the claim says until the provider answers again.
            log.warning("checking drift failed: %s", error, extra={"nodeclaim": claim.name})
            current = claim.condition(nodeclaim.DRIFTED)
            return current.reason if current is not None and current.is_true else None
        return str(reason) if reason else None

    async def _write(self, before: nodeclaim.NodeClaim, after: nodeclaim.NodeClaim) -> None:
        """Only the fields this controller owns; the list is sent whole (even empty: a merge patch replaces lists)."""
        owned: dict[str, Any] = {"conditions": status.conditions(after.status.conditions)}
        if after.status.last_pod_event_time is not None:
            owned["lastPodEventTime"] = decoding.format_timestamp(after.status.last_pod_event_time)
        patch = {"metadata": {"resourceVersion": before.metadata.resource_version}, "status": owned}
        result = await self._deps.client.patch(resources.NODECLAIMS, after.name, patch, subresource="status")
        self._own_writes.record(result)

    def forget(self, name: str) -> None:
        self._memory.pop(name, None)

    # --- loop ---------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: reconcile every claim when it is new or changed, its pool or its pool's node class changed (a
        newer AMI in the class's status drifts the claim now, not at the 5-min requeue), a pod event arrived for its
        node, or its requeue time came. Cancel to stop."""
        due: dict[str, float] = {}
        seen: dict[str, tuple[str, str, str]] = {}
        deps = self._deps
        while True:
            if deps.cluster.synced():
                try:
                    await self._pass(due, seen)
                except Exception:  # a bug costs one pass, never the loop (the leader would exit)
                    log.exception("nodeclaim disruption conditions pass raised")
            await deps.clock.sleep(POLL)

    async def _pass(self, due: dict[str, float], seen: dict[str, tuple[str, str, str]]) -> None:
        deps = self._deps
        now = deps.clock.now()
        claims = {c.name: c for c in deps.cluster.nodeclaims()}
        for gone in set(seen) - set(claims):
            seen.pop(gone, None)
            due.pop(gone, None)
            self.forget(gone)
        for owner in self.route_pod_events(claims.values()):
            due[owner] = min(due.get(owner, now), now)
        classes = deps.cluster.nodeclasses()
        for name, claim in claims.items():
            pool = deps.cluster.nodepool(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))
            nc = classes.get(pool.template.node_class_ref.name) if pool else None
            signature = (
                claim.metadata.resource_version,
                pool.metadata.resource_version if pool else "",
                nc.metadata.resource_version if nc else "",
            )
            if seen.get(name) != signature:
                seen[name] = signature
                due[name] = now
        ready = sorted(n for n, when in due.items() if when <= now)
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(name: str) -> None:
            async with limit:
                try:
                    after = await self.reconcile(name)
                except (kube_client.KubeError, cloudprovider_errors.CloudProviderError, OSError, TimeoutError) as error:
                    # A transport failure too (an overloaded API server times out): one claim's, not the loop's.
                    log.warning(
                        "reconciling nodeclaim disruption conditions failed: %s", error, extra={"nodeclaim": name}
                    )
                    after = ERROR_BACKOFF
                except Exception:  # one claim's failure must not end the loop (nor cancel its siblings)
                    log.exception("reconciling nodeclaim disruption conditions raised", extra={"nodeclaim": name})
                    after = FAILED_BACKOFF
            if after is None:
                due.pop(name, None)
            else:
                due[name] = now + after

        async with asyncio.TaskGroup() as group:
            for name in ready:
                group.create_task(one(name))


def _latest(*times: float | None) -> float | None:
    present = [t for t in times if t is not None]
    return max(present) if present else None


def _log_changes(before: nodeclaim.NodeClaim, after: nodeclaim.NodeClaim) -> None:
    for type_ in (nodeclaim.CONSOLIDATABLE, nodeclaim.DRIFTED):
        was, now = before.is_true(type_), after.is_true(type_)
        if was != now:
            found = after.condition(type_)
            reason = found.reason if found is not None else ""
            log.info(
                "%s %s",
                "marking" if now else "removing",
                type_.lower(),
                extra={"nodeclaim": after.name, "reason": reason},
            )
