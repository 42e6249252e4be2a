"""How many of a NodePool's NodeClaims are active, deleting and pending disruption, and how many more its
`limits.nodes` allows (core: pkg/controllers/state/statenodepool.go NodePoolState). Static pools count this way:
their provisioning and deprovisioning (`karpy.static`) and drift's one-for-one replacement (`disruption.methods`).

*Deleting*: a deletionTimestamp, or marked for deletion by a disruption command. *Pending disruption*: a
DisruptionReason condition (the disruption queue is replacing it). *Active*: the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

from karpy.api import labels, nodeclaim, nodepool
from karpy.state import statenode

NODE: Final = 1000
"""One node in the `nodes` limit (limits are milli-units)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Counts:
    active: int = 0
    deleting: int = 0
    pending: int = 0
    """Pending disruption: being replaced by the disruption queue."""


def pool_nodes(nodes: Iterable[statenode.StateNode], pool: str) -> list[statenode.StateNode]:
    """The state nodes of `pool` that have a NodeClaim (a static pool's capacity is its NodeClaims)."""
    return [n for n in nodes if n.nodeclaim is not None and n.nodepool == pool]


def deleting(node: statenode.StateNode) -> bool:
    return node.deleting or node.marked_for_deletion


def pending(node: statenode.StateNode) -> bool:
    return node.nodeclaim is not None and node.nodeclaim.is_true(nodeclaim.DISRUPTION_REASON)


def counts(nodes: Iterable[statenode.StateNode]) -> Counts:
    """How many of a pool's nodes are active, deleting and pending disruption."""
    active = gone = replacing = 0
    for n in nodes:
        if deleting(n):
            gone += 1
        elif pending(n):
            replacing += 1
        else:
            active += 1
    return Counts(active, gone, replacing)


def node_limit(pool: nodepool.NodePool) -> int | None:
    """The pool's `limits.nodes` as a count, None when unlimited."""
    limit = pool.limits.get(labels.RESOURCE_NODES)
    return None if limit is None else limit // NODE


def headroom(pool: nodepool.NodePool, found: Counts) -> int | None:
    """How many more NodeClaims `limits.nodes` allows now (None: unlimited). Every counted claim holds a node."""
    limit = node_limit(pool)
    return None if limit is None else max(0, limit - found.active - found.deleting - found.pending)
