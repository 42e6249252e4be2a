"""The expiration reconciler (core: nodeclaim/expiration/controller.go): a NodeClaim whose `creation + expireAfter`
has come is deleted at once — no disruption budget, no pre-spun replacement (its pods go pending and the
provisioner replaces the capacity as the node drains). `expireAfter: Never` never expires.

A claim in a capacity block also leaves here, 40 minutes before the block ends (`capacityblocks`, upstream's
capacityreservation.expiration controller): deleted the same way, logged as upstream logs it, with no disruption
Event or metric (upstream records none for it either).

The decision (`expires_at`, `expired`) is pure; the controller around it re-reads the claim from the API server before
deleting (the cache may be stale), logs the upstream "disrupting nodeclaim(s)" line with reason Expired, and records
DisruptionTerminating Events on the NodeClaim and its Node. Deleting an already-deleting claim is a no-op, so re-runs
are safe; through a `DryRunClient` the delete is only logged and `run` does not repeat it until the claim changes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy import events, rejections
from karpy.api import labels, nodeclaim, parse
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import capacityblocks, roles

log = logging.getLogger(__name__)

POLL: Final = 10.0
"""Longest `run` sleeps between passes: how soon a new claim (or a changed expireAfter) is noticed. Expiries that
are due sooner wake it exactly at their time."""
ERROR_BACKOFF: Final = 5.0
REASON: Final = "Expired"
"""The disruption reason in logs, Events and metrics (upstream metrics.ExpiredReason; not a budget reason)."""
CAPACITY_BLOCK_EXPIRING: Final = "CapacityBlockExpiring"
"""Why a claim in an ending capacity block is deleted (a log field only)."""


def expires_at(claim: nodeclaim.NodeClaim) -> float | None:
    """creationTimestamp + expireAfter, None when it never expires (or has no creation time yet)."""
    created = claim.metadata.creation_timestamp
    if created is None or claim.spec.expire_after is None:
        return None
    return created + claim.spec.expire_after


def expired(claim: nodeclaim.NodeClaim, now: float) -> bool:
    """True once `now` reaches the expiry time of a claim that is not already being deleted."""
    when = expires_at(claim)
    return when is not None and claim.metadata.deletion_timestamp is None and now >= when


class Metrics(nodeclaim.Disruptions):
    """What expiration counts: `disrupted` with reason "Expired" per expired claim deleted; nothing here, the
    operator's subclass binds it to its series."""


class Observer:
    """What expiration tells of a claim it deleted (core: nodeclaim/expiration/controller.go, disruption/events):
    DisruptionTerminating on the claim and on its Node, and the claim counted disrupted with reason Expired."""

    def __init__(self, recorder: events.Recorder, metrics: Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def expired(self, claim: nodeclaim.NodeClaim, node: Mapping[str, Any] | None) -> None:
        message = f"Disrupting node via {REASON}"
        self._recorder.record(nodeclaim.event_ref(claim), "Normal", "DisruptionTerminating", message)
        if node is not None:
            self._recorder.record(node, "Normal", "DisruptionTerminating", message)
        pool = claim.metadata.labels.get(labels.LABEL_NODEPOOL, "")
        capacity_type = claim.metadata.labels.get(labels.LABEL_CAPACITY_TYPE, "")
        self._metrics.disrupted(REASON, pool, capacity_type, termination_mode=nodeclaim.termination_mode(claim))


class ExpirationController:
    def __init__(self, deps: roles.ClusterRoles, observer: Observer) -> None:
        self._deps = deps
        self._observer = observer

    async def reconcile(self, name: str) -> float | None:
        """Delete the claim if it expired; else seconds until it does (None: never, or already going)."""
        deps = self._deps
        raw = await deps.client.get(resources.NODECLAIMS, name)
        claim = (
            rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, raw, None) if raw is not None else None
        )
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return None
        deadline = self._deadline(claim)
        if deadline is None:
            return None
        when, reason = deadline
        now = deps.clock.now()
        if now < when:
            return when - now
        try:
            await deps.client.delete(resources.NODECLAIMS, claim.name)
        except kube_client.NotFound:
            return None
        if reason == CAPACITY_BLOCK_EXPIRING:
            log.info(
                "initiating delete for capacity block expiration",
                extra={
                    "nodeclaim": claim.name,
                    "capacity-reservation-id": claim.metadata.labels.get(labels.LABEL_CAPACITY_RESERVATION_ID, ""),
                },
            )
            return None
        log.info(
            "disrupting nodeclaim(s)",
            extra={
                "reason": REASON,
                "decision": "delete",
                "nodeclaims": [claim.name],
                "nodepool": claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""),
                "expired-at": when,
            },
        )
        self._observer.expired(claim, deps.cluster.node(claim.status.node_name) if claim.status.node_name else None)
        return None

    def _deadline(self, claim: nodeclaim.NodeClaim) -> tuple[float, str] | None:
        """(when, why) the claim must go: its expireAfter or its capacity block's pre-drain, whichever is first."""
        found = [
            (when, why)
            for when, why in (
                (expires_at(claim), REASON),
                (capacityblocks.drain_at(claim, self._deps.cluster.nodeclasses()), CAPACITY_BLOCK_EXPIRING),
            )
            if when is not None
        ]
        return min(found) if found else None

    async def run(self) -> None:
        """Forever: reconcile each claim from the cluster state when its expiry comes (and once whenever it changes,
        so a claim deleted in dry-run is not deleted again every pass). Cancel to stop."""
        handled: dict[str, str] = {}  # claim -> resourceVersion its expiry was acted on at
        deps = self._deps
        while True:
            wait = POLL
            if deps.cluster.synced():
                wait = min(wait, await self._pass(handled))
            await deps.clock.sleep(wait)

    async def _pass(self, handled: dict[str, str]) -> float:
        deps = self._deps
        claims = deps.cluster.nodeclaims()
        names = {c.name for c in claims}
        for gone in set(handled) - names:
            del handled[gone]
        soonest = POLL
        for claim in claims:
            deadline = self._deadline(claim)
            if deadline is None or claim.metadata.deletion_timestamp is not None:
                continue
            when = deadline[0]
            if handled.get(claim.name) == claim.metadata.resource_version:
                continue
            remaining = when - deps.clock.now()
            if remaining > 0:
                soonest = min(soonest, remaining)
                continue
            try:
                again = await self.reconcile(claim.name)
            except kube_client.KubeError as error:
                log.warning("expiring nodeclaim failed: %s", error, extra={"nodeclaim": claim.name})
                soonest = min(soonest, ERROR_BACKOFF)
                continue
            except Exception:  # this claim is not expired this pass; the others are, and the loop goes on
                log.exception("expiring nodeclaim raised", extra={"nodeclaim": claim.name})
                handled[claim.name] = claim.metadata.resource_version  # until it changes: a retry fails alike
                continue
            if again is None:
                handled[claim.name] = claim.metadata.resource_version
            else:  # the cache was behind the API server (e.g. expireAfter changed): check again then
                soonest = min(soonest, max(again, 0.0))
        return soonest
