"""Disruptions each NodePool still allows per reason (pure; core: disruption/helpers.go
`BuildDisruptionBudgetMapping`).

numNodes counts the pool's managed (a NodeClaim is known), Initialized nodes whose instance is not already
terminating; nodes among them that are NotReady, marked for deletion or whose NodeClaim is deleting are "disrupting"
and use up the budget (core: state/statenode.go `Managed`, `MarkedForDeletion`, `Deleted`). The result is
`max(0, allowed_disruptions(pool, reason, numNodes) − disrupting)`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import budgets, nodeclaim, nodepool
from karpy.state import statenode


def node_ready(node: Mapping[str, Any] | None) -> bool:
    if node is None:
        return False
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def counts(nodes: Iterable[statenode.StateNode]) -> tuple[dict[str, int], dict[str, int]]:
    """(numNodes, disrupting) per pool name."""
    total: dict[str, int] = collections.Counter()
    disrupting: dict[str, int] = collections.Counter()
    for node in nodes:
        claim = node.nodeclaim
        # A Node without a NodeClaim is no managed node here, whatever its labels (an orphan Node left behind).
        if claim is None or not node.managed or not node.initialized:
            continue
        if claim.is_true(nodeclaim.INSTANCE_TERMINATING):
            continue
        total[node.nodepool] += 1
        # The NodeClaim's deletion, not the Node's: a Node being deleted under a live NodeClaim is not disrupting
        # until the termination controller deletes the claim.
        if node.marked_for_deletion or claim.metadata.deletion_timestamp is not None or not node_ready(node.node):
            disrupting[node.nodepool] += 1
    return dict(total), dict(disrupting)


def budget_mapping(
    pools: Iterable[nodepool.NodePool],
    nodes: Iterable[statenode.StateNode],
    reason: nodepool.DisruptionReason,
    *,
    now: float,
) -> dict[str, int]:
    """Pool name -> how many more of its nodes may be disrupted for `reason` right now."""
    total, disrupting = counts(nodes)
    return {
        pool.name: max(
            0, budgets.allowed_disruptions(pool, reason, total.get(pool.name, 0), now) - disrupting.get(pool.name, 0)
        )
        for pool in pools
    }


def blocked_pools(
    pools: Iterable[nodepool.NodePool],
    nodes: Iterable[statenode.StateNode],
    reason: nodepool.DisruptionReason,
    *,
    now: float,
) -> list[nodepool.NodePool]:
    """Pools with nodes whose budgets allow no disruption at all for `reason` now, whatever is disrupting (upstream
    publishes a DisruptionBlocked event on such a NodePool)."""
    total, _ = counts(nodes)
    return [
        pool
        for pool in pools
        if total.get(pool.name, 0) and budgets.allowed_disruptions(pool, reason, total[pool.name], now) == 0
    ]
