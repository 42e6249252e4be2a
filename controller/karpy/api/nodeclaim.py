"""NodeClaim (`karpenter.sh/v1`, cluster-scoped, spec immutable): one requested node and its lifecycle status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import labels, meta

# Status condition types (core: pkg/apis/v1/nodeclaim_status.go).
LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
CONSOLIDATABLE = "Consolidatable"
DRIFTED = "Drifted"
DRAINED = "Drained"
VOLUMES_DETACHED = "VolumesDetached"
INSTANCE_TERMINATING = "InstanceTerminating"
CONSISTENT_STATE_FOUND = "ConsistentStateFound"
DISRUPTION_REASON = "DisruptionReason"


@dataclass(frozen=True, slots=True)
class NodeClaimSpec:
    node_class_ref: meta.NodeClassRef
    requirements: tuple[meta.NodeSelectorRequirement, ...] = ()
    taints: tuple[meta.Taint, ...] = ()
    startup_taints: tuple[meta.Taint, ...] = ()
    resources: Mapping[str, int] = field(default_factory=dict)  # spec.resources.requests, milli-units
    expire_after: float | None = 720 * 3600.0
    termination_grace_period: float | None = None


@dataclass(frozen=True, slots=True)
class NodeClaimStatus:
    node_name: str = ""
    provider_id: str = ""
    image_id: str = ""
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    conditions: tuple[meta.Condition, ...] = ()
    last_pod_event_time: float | None = None


@dataclass(frozen=True, slots=True)
class NodeClaim:
    metadata: meta.ObjectMeta
    spec: NodeClaimSpec
    status: NodeClaimStatus = field(default_factory=NodeClaimStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    def condition(self, type_: str) -> meta.Condition | None:
        return meta.condition(self.status.conditions, type_)

    def is_true(self, type_: str) -> bool:
        found = self.condition(type_)
        return found is not None and found.is_true


class Disruptions:
    """Counts NodeClaims disrupted, by name: the base of the metrics of expiration, repair, the lifecycle and the
    disruption queue, which all delete claims. The operator's subclasses bind it to
    karpenter_nodeclaims_disrupted_total and karpenter_pods_disruption_initiated_total; this one counts nothing."""

    def disrupted(
        self,
        reason: str,
        nodepool: str,
        capacity_type: str,
        /,
        *,
        consolidation_policy: str = "",
        termination_mode: str = "",
        pods: int = 0,
    ) -> None:
        """One NodeClaim disrupted for `reason`, with the consolidation policy (only consolidation has one), the
        termination mode (`termination_mode`) and the reschedulable pods it disrupts."""


def termination_mode(claim: NodeClaim) -> str:
    """graceful (no terminationGracePeriod), forceful (a zero one) or eventual: the termination_mode label of the
    disruption series (core: utils/nodeclaim/nodeclaim.go `DisruptionTerminationMode`)."""
    grace = claim.spec.termination_grace_period
    if grace is None:
        return "graceful"
    return "forceful" if grace <= 0 else "eventual"


def event_ref(claim: NodeClaim) -> dict[str, Any]:
    """The NodeClaim as the event recorder takes an object (an Event names its object by kind, name and uid)."""
    return {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodeClaim",
        "metadata": {"name": claim.name, "uid": claim.metadata.uid},
    }
