"""Node auto repair (feature gate NodeRepair; core: pkg/controllers/node/health/controller.go).

A managed node is unhealthy when one of the cloud provider's repair policies matches one of its conditions (type and
status). Once the condition has held for the policy's toleration (from its lastTransitionTime; with several, the
one due first), the node's NodeClaim gets the termination-timestamp annotation (now: termination treats the grace
period as over, so pods are deleted, not evicted under their budgets) and is deleted. The provisioner replaces the
capacity as for any deleted node.

Repair stops while more than 20 % of a NodePool's nodes are unhealthy (rounded up, as a PodDisruptionBudget's
percentage: of three nodes one may be repaired): a fault that hits many nodes at once (a bad AMI, a network outage)
is not fixed by replacing them all. A NodeClaim without a NodePool is held to the same share of all the cluster's
nodes. The node then gets a NodeRepairBlocked warning, at most once per 15 minutes.

`unhealthy` and `pool_healthy` are pure; `RepairController.run` is the loop the leader runs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from karpy import events
from karpy.api import decoding, labels, nodeclaim
from karpy.cloudprovider import types
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodeclaim import roles
from karpy.state import statenode

log = logging.getLogger(__name__)

ALLOWED_UNHEALTHY: Final = 0.2
"""Fraction of a pool's nodes that may be unhealthy for repair to go on (upstream allowedUnhealthyPercent 20%)."""
POLL: Final = 10.0
"""Longest `run` sleeps between passes; a condition coming due sooner wakes it at its time."""
BLOCKED_RETRY: Final = 300.0
"""Seconds before a blocked repair is tried again (upstream requeues after five minutes)."""
BLOCKED_DEDUPE: Final = 900.0
"""Seconds a NodeRepairBlocked event about one node is not repeated (upstream DedupeTimeout 15 min)."""
REASON: Final = "unhealthy"
"""The reason of karpenter_nodeclaims_disrupted_total (upstream metrics.UnhealthyReason)."""
NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"


@dataclasses.dataclass(frozen=True, slots=True)
class Unhealthy:
    condition_type: str
    since: float
    toleration: float

    @property
    def due(self) -> float:
        return self.since + self.toleration


def _conditions(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in (node.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)]


def unhealthy(node: Mapping[str, Any], policies: Sequence[types.RepairPolicy]) -> Unhealthy | None:
    """The matching condition due first, or None when no policy matches the node."""
    found: Unhealthy | None = None
    by_type = {str(c.get("type")): c for c in _conditions(node)}
    for policy in policies:
        condition = by_type.get(policy.condition_type)
        if condition is None or condition.get("status") != policy.condition_status:
            continue
        try:
            since = decoding.timestamp(str(condition.get("lastTransitionTime") or ""))
        except ValueError:
            since = 0.0  # no usable transition time: the condition has held for as long as can be told
        candidate = Unhealthy(policy.condition_type, since, policy.toleration)
        if found is None or candidate.due < found.due:
            found = candidate
    return found


def pool_healthy(nodes: Iterable[Mapping[str, Any]], policies: Sequence[types.RepairPolicy]) -> bool:
    """Whether at most 20 % (rounded up) of `nodes` match a repair policy."""
    listed = list(nodes)
    sick = sum(1 for n in listed if unhealthy(n, policies) is not None)
    return sick <= math.ceil(ALLOWED_UNHEALTHY * len(listed))


def snake_case(name: str) -> str:
    """A condition type as upstream's metric label spells it (`pretty.ToSnakeCase`: KernelReady -> kernel_ready)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Metrics(nodeclaim.Disruptions):
    """What node repair counts, by name: `disrupted` with reason "unhealthy" per repaired claim, and the condition
    that was unhealthy. The operator's subclass binds each to its series; this one counts nothing."""

    def unhealthy_disrupted(self, condition: str, nodepool: str, capacity_type: str, image_id: str) -> None:
        """karpenter_nodeclaims_unhealthy_disrupted_total (core: node/health/metrics.go)."""


class Observer:
    """What node repair tells (core: node/health/controller.go, events.go, metrics.go): NodeRepairBlocked on a node it
    may not repair, and each claim it deleted counted disrupted (reason "unhealthy") and by its unhealthy condition."""

    def __init__(self, recorder: events.Recorder, metrics: Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def blocked(self, node: Mapping[str, Any], message: str) -> None:
        """Repair of `node` is blocked; told at most once per BLOCKED_DEDUPE whatever the message."""
        dedupe = events.about(node, timeout=BLOCKED_DEDUPE)
        self._recorder.record(node, "Warning", NODE_REPAIR_BLOCKED, message, dedupe=dedupe)

    def repaired(self, n: statenode.StateNode, claim: nodeclaim.NodeClaim, found: Unhealthy) -> None:
        """`claim`, of the unhealthy node `n`, was deleted because of `found`."""
        capacity_type = n.labels.get(labels.LABEL_CAPACITY_TYPE, "")
        self._metrics.disrupted(
            REASON, n.nodepool, capacity_type, termination_mode=nodeclaim.termination_mode(claim),
            pods=sum(1 for pod in n.pods if not pod.is_daemon),  # the pods still to drain, as upstream lists them
        )  # fmt: skip
        image = claim.status.image_id
        self._metrics.unhealthy_disrupted(snake_case(found.condition_type), n.nodepool, capacity_type, image)


class RepairController:
    def __init__(self, deps: roles.ClusterRoles, observer: Observer, *, policies: Sequence[types.RepairPolicy]) -> None:
        self._deps = deps
        self._observer = observer
        self._policies = policies
        self._blocked_until: dict[str, float] = {}
        """Node name -> when its blocked repair is tried again (its NodeRepairBlocked Event dedupes itself)."""
        self._repaired: set[str] = set()
        """NodeClaims deleted by a pass whose deletion the state cache may not show yet: deleted (and counted) once."""

    async def run(self) -> None:
        """Forever: one pass whenever the next condition comes due, at least every POLL seconds. Cancel to stop."""
        while True:
            wait = POLL
            if self._deps.cluster.synced():
                try:
                    wait = min(wait, await self.reconcile())
                except kube_client.KubeError as error:
                    log.warning("node repair pass failed: %s", error)
            await self._deps.clock.sleep(max(wait, 0.0))

    async def reconcile(self) -> float:
        """Repair every node whose unhealthy condition is due; seconds until the next one is."""
        deps = self._deps
        now = deps.clock.now()
        nodes = [n for n in deps.cluster.state_nodes() if n.node is not None and n.nodeclaim is not None]
        by_pool: dict[str, list[Mapping[str, Any]]] = {}
        everyone: list[Mapping[str, Any]] = []
        for n in deps.cluster.state_nodes():
            if n.node is not None:
                everyone.append(n.node)
                by_pool.setdefault(n.nodepool, []).append(n.node)
        self._blocked_until = {k: v for k, v in self._blocked_until.items() if v > now}
        self._repaired &= {n.nodeclaim_name for n in nodes}
        soonest = POLL
        for n in nodes:
            assert n.node is not None
            assert n.nodeclaim is not None
            found = unhealthy(n.node, self._policies)
            if found is None or n.deleting or n.nodeclaim_name in self._repaired:
                continue
            if now < found.due:
                soonest = min(soonest, found.due - now)
                continue
            if n.node_name in self._blocked_until:
                continue
            peers = by_pool.get(n.nodepool, ()) if n.nodepool else everyone  # standalone: the cluster's share
            if not pool_healthy(peers, self._policies):
                self._block(n)
                continue
            await self._repair(n, found)
        return soonest

    def _block(self, n: statenode.StateNode) -> None:
        assert n.node is not None
        now = self._deps.clock.now()
        self._blocked_until[n.node_name] = now + BLOCKED_RETRY
        where = "nodepool" if n.nodepool else "cluster"
        message = f"more than {ALLOWED_UNHEALTHY:.0%} nodes are unhealthy in the {where}"
        log.info("node repair blocked", extra={"node": n.node_name, "nodepool": n.nodepool, "reason": message})
        self._observer.blocked(n.node, message)

    async def _repair(self, n: statenode.StateNode, found: Unhealthy) -> None:
        deps = self._deps
        assert n.nodeclaim is not None
        claim = n.nodeclaim
        key = labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
        now = deps.clock.now()
        current = claim.metadata.annotations.get(key)
        if current is None or not _passed(current, now):
            # Forceful: the termination controller treats the grace period as over (upstream
            # annotateTerminationGracePeriod keeps an earlier timestamp that already passed).
            patch = {"metadata": {"annotations": {key: decoding.format_timestamp(now)}}}
            try:
                await deps.client.patch(resources.NODECLAIMS, claim.name, patch)
            except kube_client.NotFound:
                return
        if not await deps.client.delete(resources.NODECLAIMS, claim.name):
            return
        self._repaired.add(claim.name)
        log.info(
            "deleting unhealthy node",
            extra={"node": n.node_name, "nodeclaim": claim.name, "condition": found.condition_type},
        )
        self._observer.repaired(n, claim, found)


def _passed(stamp: str, now: float) -> bool:
    try:
        return decoding.timestamp(stamp) < now
    except ValueError:
        return False
