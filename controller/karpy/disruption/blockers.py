"""Why a node is not disrupted now: a `Blocker` is a kind (stable, for `karpy explain -o json` and tests) and the
sentence a person reads (the message of the node's Unconsolidatable or DisruptionBlocked event). Pure.

Messages follow upstream's events (core: pkg/controllers/disruption/{types,consolidation,emptiness}.go,
state/statenode.go `ValidateNodeDisruptable`/`ValidatePodsDisruptable`), with the names of the pod, PDB or pool
that block.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from karpy.api import labels

UNCONSOLIDATABLE = "Unconsolidatable"
"""Event reason: consolidation passed the node over (core: disruption/events `Unconsolidatable`)."""
DISRUPTION_BLOCKED = "DisruptionBlocked"
"""Event reason: the node cannot be disrupted at all now, or a NodePool's budget allows nothing (`Blocked`)."""


class Kind(enum.StrEnum):
    """What blocks; values are part of `karpy explain`'s JSON contract (only ever added to)."""

    NOT_MANAGED = "not-managed"
    NOT_REGISTERED = "not-registered"
    NOT_INITIALIZED = "not-initialized"
    DELETING = "deleting"
    NOMINATED = "nominated"
    IN_PROGRESS = "in-progress"
    UNREADABLE = "unreadable"
    DO_NOT_DISRUPT = "do-not-disrupt"
    PDB = "pdb"
    NODEPOOL_NOT_FOUND = "nodepool-not-found"
    INSTANCE_TYPE_NOT_FOUND = "instance-type-not-found"
    BUDGET = "budget"
    CONSOLIDATE_AFTER = "consolidate-after"
    CONSOLIDATION_DISABLED = "consolidation-disabled"
    POLICY = "policy"
    PODS_DO_NOT_FIT = "pods-do-not-fit"
    REPLACEMENTS = "replacements"
    NOT_CHEAPER = "not-cheaper"
    SPOT_TO_SPOT = "spot-to-spot"
    MIN_VALUES = "min-values"
    BUFFER_PODS = "buffer-pods"


@dataclass(frozen=True, slots=True)
class Blocker:
    kind: Kind
    message: str

    def __str__(self) -> str:
        return self.message


def not_managed() -> Blocker:
    return Blocker(Kind.NOT_MANAGED, "Node isn't managed by karpenter")


def not_registered() -> Blocker:
    return Blocker(Kind.NOT_REGISTERED, "NodeClaim does not have an associated node")


def not_initialized() -> Blocker:
    return Blocker(Kind.NOT_INITIALIZED, "Node isn't initialized")


def deleting() -> Blocker:
    return Blocker(Kind.DELETING, "Node is deleting or marked for deletion")


def nominated() -> Blocker:
    return Blocker(Kind.NOMINATED, "Node is nominated for a pending pod")


def in_progress() -> Blocker:
    return Blocker(Kind.IN_PROGRESS, "Candidate is already being disrupted")


def unreadable_pod(pod: str) -> Blocker:
    return Blocker(Kind.UNREADABLE, f"Pod {pod} on the node cannot be read")


def node_do_not_disrupt() -> Blocker:
    return Blocker(
        Kind.DO_NOT_DISRUPT, f'Disruption is blocked through the "{labels.ANNOTATION_DO_NOT_DISRUPT}" annotation'
    )


def pod_do_not_disrupt(pod: str) -> Blocker:
    return Blocker(Kind.DO_NOT_DISRUPT, f'Pod {pod} has the "{labels.ANNOTATION_DO_NOT_DISRUPT}" annotation')


def pdb_blocks(pdb: str, pod: str) -> Blocker:
    return Blocker(Kind.PDB, f"PodDisruptionBudget {pdb} prevents evicting pod {pod}")


def several_pdbs(pod: str, pdbs: list[str]) -> Blocker:
    return Blocker(
        Kind.PDB, f"Pod {pod} matches several PodDisruptionBudgets ({', '.join(pdbs)}): eviction does not support that"
    )


def nodepool_not_found(name: str) -> Blocker:
    return Blocker(Kind.NODEPOOL_NOT_FOUND, f"NodePool not found (NodePool={name})")


def instance_type_not_found(name: str) -> Blocker:
    return Blocker(Kind.INSTANCE_TYPE_NOT_FOUND, f'Instance Type "{name}" not found')


def offering_not_found(name: str) -> Blocker:
    return Blocker(
        Kind.INSTANCE_TYPE_NOT_FOUND,
        f'No offering of instance type "{name}" matches the node\'s zone and capacity type',
    )


def buffer_pods(node: str) -> Blocker:
    """The provisioner keeps a CapacityBuffer's room on this node (core: disruption/emptiness.go HasBufferPods)."""
    return Blocker(Kind.BUFFER_PODS, f'Node "{node}" has buffer pods')


def budget(pool: str, reason: str) -> Blocker:
    return Blocker(Kind.BUDGET, f'NodePool "{pool}" allows no more {reason} disruptions now (disruption budget)')


def pool_budget_blocked(reason: str) -> str:
    """The NodePool's own DisruptionBlocked message when its budget allows nothing for `reason`."""
    return f"No allowed disruptions for disruption reason {reason} due to blocking budget"


def consolidate_after(wait: str) -> Blocker:
    return Blocker(Kind.CONSOLIDATE_AFTER, f"Node is not consolidatable yet: {wait}")


def consolidation_disabled(pool: str) -> Blocker:
    return Blocker(Kind.CONSOLIDATION_DISABLED, f'NodePool "{pool}" has consolidation disabled')


def when_empty(pool: str) -> Blocker:
    return Blocker(Kind.POLICY, f'NodePool "{pool}" has consolidation policy WhenEmpty, but node is not empty')
