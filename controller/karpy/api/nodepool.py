"""NodePool (`karpenter.sh/v1`, cluster-scoped): the template for NodeClaims plus disruption controls and limits."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels, meta

DEFAULT_EXPIRE_AFTER_SECONDS = 720 * 3600.0
DEFAULT_BUDGET_NODES = "10%"


class ConsolidationPolicy(enum.StrEnum):
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
    WHEN_EMPTY = "WhenEmpty"
    BALANCED = "Balanced"  # v1.14


class DisruptionReason(enum.StrEnum):
    """Budget reasons (NodePool.spec.disruption.budgets[].reasons) and the DisruptionReason condition."""

    UNDERUTILIZED = "Underutilized"
    EMPTY = "Empty"
    DRIFTED = "Drifted"


@dataclass(frozen=True, slots=True)
class NodeClaimTemplate:
    """spec.template: what every NodeClaim of the pool inherits. Durations are seconds; None means Never/unset."""

    node_class_ref: meta.NodeClassRef
    requirements: tuple[meta.NodeSelectorRequirement, ...] = ()
    labels: Mapping[str, str] = meta.EMPTY
    annotations: Mapping[str, str] = meta.EMPTY
    taints: tuple[meta.Taint, ...] = ()
    startup_taints: tuple[meta.Taint, ...] = ()
    expire_after: float | None = DEFAULT_EXPIRE_AFTER_SECONDS
    termination_grace_period: float | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    """One disruption budget. `nodes` is "10%" or "5"; `schedule` (cron, UTC) and `duration` come together."""

    nodes: str = DEFAULT_BUDGET_NODES
    schedule: str | None = None
    duration: float | None = None
    reasons: tuple[DisruptionReason, ...] | None = None


@dataclass(frozen=True, slots=True)
class Disruption:
    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: float | None = 0.0  # None == "Never"
    budgets: tuple[Budget, ...] = (Budget(),)


@dataclass(frozen=True, slots=True)
class NodePoolStatus:
    resources: Mapping[str, int] = field(default_factory=dict)  # milli-units
    nodes: int = 0
    node_class_observed_generation: int = 0
    conditions: tuple[meta.Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class NodePool:
    metadata: meta.ObjectMeta
    template: NodeClaimTemplate
    disruption: Disruption = field(default_factory=Disruption)
    limits: Mapping[str, int] = field(default_factory=dict)  # milli-units; the pseudo-resource "nodes" counts nodes
    weight: int | None = None
    replicas: int | None = None  # ALPHA static capacity
    status: NodePoolStatus = field(default_factory=NodePoolStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


def event_ref(pool: NodePool) -> dict[str, Any]:
    """The NodePool as the event recorder takes an object (an Event names its object by kind, name and uid)."""
    return {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodePool",
        "metadata": {"name": pool.name, "uid": pool.metadata.uid},
    }
