"""The consistency reconciler (core: pkg/controllers/nodeclaim/consistency/controller.go and nodeshape.go): every
`SCAN_PERIOD` per NodeClaim, compares the Node the kubelet registered with what the cloud provider said it launched.

The one check upstream runs is the node's shape: for each resource the claim requested, a node whose capacity is
under 90 % of the claim's `status.capacity` (an instance that came up with less memory than its type promises, a
mis-set max-pods) is an issue. Each issue is a `FailedConsistencyCheck` warning on the NodeClaim, and the claim's
`ConsistentStateFound` condition says whether the last scan found any (True once a scan finds none). Claims that are
deleting or not yet initialized are not checked (they pass), claims without a providerID or a Node are not scanned,
and claims of another controller (no NodePool here, or a node class of another group or kind) are left alone.

`issues` and `scan` are pure; `ConsistencyController.run` is the loop the leader runs, on the injected clock. The
condition is written to the status subresource guarded by the claim's resourceVersion; a conflict is retried on the
next pass.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy import events
from karpy.api import labels, meta, nodeclaim, nodepool, quantity, status
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import conditions, roles
from karpy.state import facts

log = logging.getLogger(__name__)

SCAN_PERIOD: Final = 600.0
"""Seconds between two scans of one claim (upstream scanPeriod, 10 minutes)."""
POLL: Final = 10.0
"""Seconds between `run` passes over the cluster state (how soon a newly registered claim is first scanned)."""
SHAPE_FLOOR: Final = 0.90
"""A node with less than this share of any resource its claim's capacity promised is inconsistent."""
FAILED_CONSISTENCY_CHECK: Final = "FailedConsistencyCheck"
CONSISTENCY_CHECK_FAILED: Final = "ConsistencyCheckFailed"


def issues(claim: nodeclaim.NodeClaim, node: Mapping[str, Any]) -> list[str]:
    """The node-shape issues of an initialized, non-deleting claim and its Node, in upstream's wording."""
    if claim.metadata.deletion_timestamp is not None or not claim.is_true(nodeclaim.INITIALIZED):
        return []
    node_status = node.get("status")
    raw_capacity = node_status.get("capacity") if isinstance(node_status, Mapping) else None
    capacity = raw_capacity if isinstance(raw_capacity, Mapping) else {}
    found: list[str] = []
    for name in sorted(claim.spec.resources):
        requested, expected = claim.spec.resources[name], claim.status.capacity.get(name, 0)
        if requested == 0 or expected == 0:
            continue
        try:
            actual = quantity.parse(capacity.get(name, 0))
        except quantity.QuantityError:
            actual = 0  # a capacity the kubelet cannot have written counts as none
        share = actual / expected
        if share < SHAPE_FLOOR:
            found.append(
                f"expected {quantity.format_resource(name, expected)} of resource {name}, but found "
                f"{quantity.format_resource(name, actual)} ({share * 100:.1f}% of expected)"
            )
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class Scan:
    """What one scan of a claim found and the conditions it leaves on it."""

    issues: list[str]
    conditions: tuple[meta.Condition, ...]


def scan(claim: nodeclaim.NodeClaim, node: Mapping[str, Any], *, now: float) -> Scan:
    """The scan's issues and the claim's conditions after it: ConsistentStateFound False on any issue, True when
    none (left as it is when already True, so its transition time stays)."""
    found = issues(claim, node)
    current = claim.status.conditions
    if found:
        updated = conditions.set_condition(
            current,
            nodeclaim.CONSISTENT_STATE_FOUND,
            conditions.FALSE,
            now=now,
            reason=CONSISTENCY_CHECK_FAILED,
            message="Consistency Check Failed",
        )
    elif not claim.is_true(nodeclaim.CONSISTENT_STATE_FOUND):
        updated = conditions.set_condition(current, nodeclaim.CONSISTENT_STATE_FOUND, conditions.TRUE, now=now)
    else:
        updated = current
    return Scan(found, updated)


def managed(claim: nodeclaim.NodeClaim, pool: nodepool.NodePool | None) -> bool:
    """A claim of a NodePool this controller serves, whose node class is of that pool's group and kind."""
    if pool is None:
        return False
    ref, ours = claim.spec.node_class_ref, pool.template.node_class_ref
    return (ref.group, ref.kind) == (ours.group, ours.kind)


class Observer:
    """What the consistency check tells (core: nodeclaim/consistency/controller.go): each issue a
    FailedConsistencyCheck warning on the claim, logged as well. It counts nothing (upstream has no metric here)."""

    def __init__(self, recorder: events.Recorder) -> None:
        self._recorder = recorder

    def inconsistent(self, claim: nodeclaim.NodeClaim, issue: str) -> None:
        log.info("failed consistency check", extra={"nodeclaim": claim.name, "issue": issue})
        self._recorder.record(nodeclaim.event_ref(claim), "Warning", FAILED_CONSISTENCY_CHECK, issue)


class ConsistencyController:
    def __init__(self, deps: roles.ClusterRoles, observer: Observer) -> None:
        self._deps = deps
        self._observer = observer
        self._scanned: dict[str, float] = {}  # claim uid -> when it was last scanned (lost on restart: one rescan)

    async def run(self) -> None:
        """Forever: scan each claim that is due. Cancel to stop."""
        while True:
            if self._deps.cluster.synced():
                try:
                    await self.scan_due()
                except Exception:  # a bug costs one pass, never the loop (the leader would exit)
                    log.exception("nodeclaim consistency pass raised")
            await self._deps.clock.sleep(POLL)

    async def scan_due(self) -> None:
        """One pass: scan every managed, registered claim not scanned in the last `SCAN_PERIOD`."""
        deps = self._deps
        now = deps.clock.now()
        claims = deps.cluster.nodeclaims()
        live = {c.metadata.uid for c in claims}
        for gone in set(self._scanned) - live:
            del self._scanned[gone]
        for claim in claims:
            last = self._scanned.get(claim.metadata.uid)
            if last is not None and now - last < SCAN_PERIOD:
                continue
            if not claim.status.provider_id or not claim.status.node_name:
                continue
            pool = deps.cluster.nodepool(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))
            if not managed(claim, pool):
                continue
            node = deps.cluster.node(claim.status.node_name)
            if node is None or facts.node_provider_id(node) != claim.status.provider_id:
                continue  # upstream scans only a claim whose one Node it finds by providerID
            try:
                await self._scan(claim, node, now=now)
            except kube_client.Conflict:
                continue  # the cache was behind: the next pass reads the newer claim
            except kube_client.NotFound:
                continue
            except (kube_client.KubeError, OSError, TimeoutError) as error:
                log.warning("checking nodeclaim consistency failed: %s", error, extra={"nodeclaim": claim.name})
                continue
            self._scanned[claim.metadata.uid] = now

    async def _scan(self, claim: nodeclaim.NodeClaim, node: Mapping[str, Any], *, now: float) -> None:
        deps = self._deps
        result = scan(claim, node, now=now)
        for issue in result.issues:
            self._observer.inconsistent(claim, issue)
        if result.conditions == claim.status.conditions:
            return
        patch = {
            "metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": {"conditions": status.conditions(result.conditions)},
        }
        await deps.client.patch(resources.NODECLAIMS, claim.name, patch, subresource="status")
