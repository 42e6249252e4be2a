"""The Node finalizer (`karpenter.sh/termination`): cordon, drain, wait for volumes, terminate, release (core:
pkg/controllers/node/termination/controller.go).

A thin async shell around `drain`. Every step re-reads the Node, its NodeClaim, its pods and the cloud, so a
restart at any point resumes where the API says the node is. Pods leave only through the Eviction API (a 429 from
a PodDisruptionBudget is retried with per-pod backoff, never bypassed); a pod is deleted directly only once the
NodeClaim's terminationGracePeriod forces it. Progress is published as the NodeClaim's Drained, VolumesDetached and
InstanceTerminating conditions.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy import rejections
from karpy.api import labels, nodeclaim
from karpy.api import status as api_status
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import conditions, lifecycle
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.state import cluster as state_cluster
from karpy.termination import drain
from karpy.termination import observer as termination_observer

log = logging.getLogger(__name__)

MIN_DRAIN_TIME: Final = 5.0
"""Seconds between the start of a drain and Drained=True, even for an empty node (upstream MinDrainTime)."""
DRAIN_POLL: Final = 1.0
INSTANCE_TERMINATION_POLL: Final = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The finalizer's collaborators: the API (Nodes, NodeClaims, pods, evictions), the cloud (terminate, get),
    time, who tells what it does (Events and metrics), and where unreadable NodeClaims and pods are reported."""

    client: kube_client.KubeClient
    cloud: types.CloudProvider
    clock: karpy_clock.Clock
    observer: termination_observer.Observer
    rejections: rejections.Sink


FORCEFUL: Final = "Forceful Termination"
"""pods_drained_total's reason when the NodeClaim carries no DisruptionReason (upstream's value)."""


def drain_reason(claim: nodeclaim.NodeClaim | None) -> str:
    """Why the node's pods are drained: its NodeClaim's DisruptionReason, else forceful (upstream: "" with no claim)."""
    if claim is None:
        return ""
    found = claim.condition(nodeclaim.DISRUPTION_REASON)
    return found.reason if found is not None and found.is_true else FORCEFUL


class _Unreadable:
    """The Node's NodeClaim exists but does not parse."""


UNREADABLE: Final = _Unreadable()
UNREADABLE_POLL: Final = 60.0
"""Seconds between looks at a terminating Node whose NodeClaim cannot be read (the claim may be fixed)."""


@dataclasses.dataclass(slots=True)
class _Retry:
    failures: int = 0
    not_before: float = 0.0


class TerminationController:
    """Reconciles one terminating Node per call. In memory only: eviction backoff (safe to lose)."""

    def __init__(
        self,
        deps: Deps,
        *,
        claims: state_cluster.Cluster,
        backoff: drain.Backoff | None = None,
    ) -> None:
        """`claims`: the state cache, whose providerID index names the NodeClaim of a Node with no owner reference
        (upstream lists its informer cache by that index: pkg/utils/node/node.go, NodeClaimForNode)."""
        self._deps = deps
        self._claims = claims
        self._backoff = backoff or drain.Backoff()
        self._retries: dict[str, dict[str, _Retry]] = {}

    async def reconcile(self, node_name: str) -> float | None:
        try:
            return await self._reconcile(node_name)
        except kube_client.NotFound:
            return None
        except kube_client.Conflict:
            return DRAIN_POLL

    async def _reconcile(self, node_name: str) -> float | None:
        client, cloud = self._deps.client, self._deps.cloud
        node = await client.get(resources.NODES, node_name)
        if node is None:
            self._retries.pop(node_name, None)
            return None
        md = node.get("metadata") or {}
        if not md.get("deletionTimestamp") or labels.FINALIZER_TERMINATION not in (md.get("finalizers") or ()):
            return None
        provider_id = str((node.get("spec") or {}).get("providerID", ""))
        found = await self._claim_for(node, provider_id)
        if isinstance(found, _Unreadable):
            # Never drain or terminate on the strength of a NodeClaim karpy cannot read (its grace period, its
            # instance): the claim is reported, the Node keeps its finalizer until the claim reads again.
            log.warning("terminating node waits: its nodeclaim cannot be read", extra={"node": node_name})
            return UNREADABLE_POLL
        claim = found
        if claim is not None and claim.metadata.deletion_timestamp is None:
            await client.delete(resources.NODECLAIMS, claim.name)  # Node deletion deletes its NodeClaim too

        # The instance may already be gone (a kubelet that still posts Ready means it is not): release at once.
        if not lifecycle.node_ready(node):
            try:
                await cloud.get(provider_id)
            except cloudprovider_errors.NodeClaimNotFound:
                return await self._release(node_name, node)
        target = claim
        if target is None:
            # Nobody else will terminate this instance (its NodeClaim was removed by hand): use the cloud's view.
            log.error("no nodeclaim for terminating node; terminating its instance", extra={"node": node_name})
            try:
                target = await cloud.get(provider_id)
            except cloudprovider_errors.NodeClaimNotFound:
                return await self._release(node_name, node)

        termination_time = lifecycle.termination_time(claim) if claim is not None else None
        patch = drain.disrupted_patch(node)
        if patch is not None:
            await client.patch(resources.NODES, node_name, patch)
            log.info("tainted node", extra={"node": node_name, "taint": f"{drain.DISRUPTED_TAINT.key}:NoSchedule"})

        now = self._deps.clock.now()
        raw_pods, _ = await client.list(resources.PODS, field_selector=f"spec.nodeName={node_name}")
        pods = [self._drain_pod(p) for p in raw_pods]
        plan = drain.plan(pods, now=now, termination_time=termination_time)
        await self._delete_expiring(plan.delete, termination_time, now, reason=drain_reason(claim))
        await self._evict(node_name, plan.evict, now, reason=drain_reason(claim))
        if not plan.drained or not self._min_drain_elapsed(claim, now):
            if claim is not None:
                claim = await self._set(claim, nodeclaim.DRAINED, conditions.UNKNOWN, "Draining", "Draining")
            if not plan.drained:
                self._deps.observer.failed_draining(node, len(plan.waiting))
            return DRAIN_POLL
        if claim is not None:
            drained = claim.condition(nodeclaim.DRAINED)
            claim = await self._set(claim, nodeclaim.DRAINED, conditions.TRUE)
            if drained is None or not drained.is_true:  # once, not on every later pass
                self._deps.observer.drained(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))

        blocking = await self._blocking_attachments(node_name, pods, now)
        tgp_elapsed = termination_time is not None and now >= termination_time
        if blocking and not tgp_elapsed:
            if claim is not None:
                await self._set(
                    claim,
                    nodeclaim.VOLUMES_DETACHED,
                    conditions.UNKNOWN,
                    "AwaitingVolumeDetachment",
                    "AwaitingVolumeDetachment",
                )
            self._deps.observer.awaiting_volumes(node, blocking)
            return DRAIN_POLL
        if claim is not None:
            if blocking:
                reason = "TerminationGracePeriodElapsed"
                claim = await self._set(claim, nodeclaim.VOLUMES_DETACHED, conditions.FALSE, reason, reason)
            else:
                claim = await self._set(claim, nodeclaim.VOLUMES_DETACHED, conditions.TRUE)

        try:
            await cloud.delete(target)
        except cloudprovider_errors.NodeClaimNotFound:
            return await self._release(node_name, node)
        if claim is not None:
            await self._set(claim, nodeclaim.INSTANCE_TERMINATING, conditions.TRUE)
        return INSTANCE_TERMINATION_POLL

    # --- steps --------------------------------------------------------------------------------------------------

    async def _delete_expiring(
        self, pods: tuple[drain.DrainPod, ...], termination_time: float | None, now: float, *, reason: str
    ) -> None:
        if termination_time is None:
            return
        grace = drain.delete_grace_seconds(termination_time, now)
        for pod in pods:
            await self._deps.client.delete(
                resources.PODS, pod.name, namespace=pod.namespace, grace_period_seconds=grace
            )
            self._deps.observer.deleted(pod, grace, reason=reason)
            log.info("deleting pod", extra={"pod": pod.key, "delete.gracePeriodSeconds": grace})

    async def _evict(self, node_name: str, pods: tuple[drain.DrainPod, ...], now: float, *, reason: str) -> None:
        retries = self._retries.setdefault(node_name, {})
        for pod in pods:
            retry = retries.setdefault(pod.key, _Retry())
            if now < retry.not_before:
                continue
            outcome = await self._deps.client.evict(pod.namespace, pod.name)
            self._deps.observer.eviction(pod, outcome, reason=reason)
            if outcome in (kube_client.EvictionOutcome.EVICTED, kube_client.EvictionOutcome.NOT_FOUND):
                retries.pop(pod.key, None)
                if outcome is kube_client.EvictionOutcome.EVICTED:
                    log.info("evicted pod", extra={"pod": pod.key})
                continue
            retry.failures += 1
            retry.not_before = now + self._backoff.delay(retry.failures)

    def _min_drain_elapsed(self, claim: nodeclaim.NodeClaim | None, now: float) -> bool:
        if claim is None:
            return True
        drained = claim.condition(nodeclaim.DRAINED)
        if drained is not None and drained.is_true:
            return True
        if drained is None or drained.status != conditions.UNKNOWN or drained.reason != "Draining":
            return False  # the drain starts now: its start time is persisted as the condition's transition time
        start = drained.last_transition_time
        return start is not None and now - start >= MIN_DRAIN_TIME

    async def _blocking_attachments(self, node_name: str, pods: list[drain.DrainPod], now: float) -> list[str]:
        attachments, _ = await self._deps.client.list(resources.VOLUMEATTACHMENTS)
        on_node = [a for a in attachments if (a.get("spec") or {}).get("nodeName") == node_name]
        if not on_node:
            return []
        ignored: set[str] = set()
        for pod in pods:
            if drain.drainable(pod, now):
                continue
            for claim_name in pod.pvc_names:
                pvc = await self._deps.client.get(resources.PVCS, claim_name, namespace=pod.namespace)
                volume = ((pvc or {}).get("spec") or {}).get("volumeName")
                if volume:
                    ignored.add(str(volume))
        return drain.blocking_attachments(on_node, node_name=node_name, ignored_volumes=frozenset(ignored))

    async def _release(self, node_name: str, node: Mapping[str, Any]) -> float | None:
        md = node.get("metadata") or {}
        rest = [f for f in md.get("finalizers") or () if f != labels.FINALIZER_TERMINATION]
        patch: dict[str, Any] = {"metadata": {"finalizers": rest}}
        if md.get("resourceVersion"):
            patch["metadata"]["resourceVersion"] = md["resourceVersion"]
        await self._deps.client.patch(resources.NODES, node_name, patch)
        self._retries.pop(node_name, None)
        self._deps.observer.released(node, self._deps.clock.now())
        log.info("deleted node", extra={"node": node_name})
        return None

    # --- plumbing -----------------------------------------------------------------------------------------------

    async def _claim_for(self, node: Mapping[str, Any], provider_id: str) -> nodeclaim.NodeClaim | _Unreadable | None:
        owners = (node.get("metadata") or {}).get("ownerReferences") or ()
        for owner in owners:
            if owner.get("kind") == "NodeClaim" and owner.get("apiVersion", "").startswith(f"{labels.GROUP}/"):
                raw = await self._deps.client.get(resources.NODECLAIMS, str(owner.get("name", "")))
                if raw is not None:
                    return self._parse(raw)
        if not provider_id:
            return None
        # The index names the claim; the claim itself is read fresh, as the owner-reference path does.
        names = [c.name for c in self._claims.nodeclaims_for_provider_id(provider_id)]
        if len(names) != 1:
            unread = [u for u in self._claims.unreadable(resources.NODECLAIMS) if _provider_id(u) == provider_id]
            return UNREADABLE if unread and not names else None
        raw = await self._deps.client.get(resources.NODECLAIMS, names[0])
        if raw is None or (raw.get("status") or {}).get("providerID") != provider_id:
            return None
        return self._parse(raw)

    def _drain_pod(self, raw: Mapping[str, Any]) -> drain.DrainPod:
        try:
            return drain.from_manifest(raw)
        except Exception as exc:  # held, reported, never evicted or deleted; the other pods drain as usual
            self._deps.rejections.report(
                rejections.about(resources.PODS, raw),
                reason=rejections.Reason.INVALID,
                problem=f"its manifest cannot be read for draining ({type(exc).__name__}: {exc})",
            )
            return drain.unreadable(raw)

    def _parse(self, raw: Mapping[str, Any]) -> nodeclaim.NodeClaim | _Unreadable:
        claim = nodeclaim_controller.parse_or_report(raw, self._deps.rejections)
        return UNREADABLE if claim is None else claim

    async def _set(
        self, claim: nodeclaim.NodeClaim, type_: str, status: str, reason: str = "", message: str = ""
    ) -> nodeclaim.NodeClaim:
        now = self._deps.clock.now()
        updated = lifecycle.with_condition(claim, type_, status, now=now, reason=reason, message=message)
        if updated.status != claim.status:
            await self._deps.client.patch(
                resources.NODECLAIMS, claim.name, {"status": api_status.to_status(updated)}, subresource="status"
            )
        return updated


def _provider_id(raw: Mapping[str, Any]) -> str:
    status = raw.get("status")
    value = status.get("providerID") if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else ""
