"""Interruption decisions (pure): a queue message + the NodeClaims it names → what to do for each
(aws: pkg/controllers/interruption/controller.go, events/events.go).

| message kind                      | events (NodeClaim and Node)            | action                                 |
|-----------------------------------|----------------------------------------|----------------------------------------|
| spot interruption warning         | SpotInterrupted                        | delete; mark (type, zone, spot) unav.  |
| scheduled change (AWS Health)     | InstanceUnhealthy                      | delete                                 |
| state change stopping / stopped   | InstanceStopping                       | delete                                 |
| state shutting-down / terminated  | InstanceTerminating                    | delete                                 |
| capacity reservation interruption | CapacityReservationInstanceInterrupted | delete; mark the reservation unav.     |
| rebalance recommendation          | SpotRebalanceRecommendation            | none, unless the NodePool is annotated |
|                                   |                                        | karpy.dev/replace-on-rebalance: "true" |
| instance/system status check fail | InstanceUnhealthy                      | forceful: termination time now, delete |

"Delete" is cordon-and-drain: deleting the NodeClaim starts graceful termination, and the provisioner pre-spins a
replacement for the pods of the leaving node. A NodeClaim already being deleted is not deleted again. Instances
are matched to NodeClaims through `status.providerID` (its last path segment is the instance id).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from karpy.api import labels, nodeclaim
from karpy.cloudprovider import interruption

NORMAL = "Normal"
WARNING = "Warning"
REPLACE_ON_REBALANCE = "true"


class Reason(enum.StrEnum):
    SPOT_INTERRUPTED = "SpotInterrupted"
    REBALANCE_RECOMMENDATION = "SpotRebalanceRecommendation"
    INSTANCE_STOPPING = "InstanceStopping"
    INSTANCE_TERMINATING = "InstanceTerminating"
    INSTANCE_UNHEALTHY = "InstanceUnhealthy"
    CAPACITY_RESERVATION_INTERRUPTED = "CapacityReservationInstanceInterrupted"
    TERMINATING_ON_INTERRUPTION = "TerminatingOnInterruption"


@dataclass(frozen=True, slots=True)
class Notice:
    """An Event to record on the NodeClaim and, when it has one, on its Node (`message` may name `{kind}`)."""

    type: str
    reason: Reason
    message: str


_NOTICES: Mapping[interruption.Kind, Notice] = {
    interruption.Kind.SPOT_INTERRUPTION: Notice(
        WARNING, Reason.SPOT_INTERRUPTED, "Spot interruption warning was triggered"
    ),
    interruption.Kind.REBALANCE_RECOMMENDATION: Notice(
        NORMAL, Reason.REBALANCE_RECOMMENDATION, "Spot rebalance recommendation was triggered"
    ),
    interruption.Kind.INSTANCE_STOPPED: Notice(WARNING, Reason.INSTANCE_STOPPING, "Instance is stopping"),
    interruption.Kind.INSTANCE_TERMINATED: Notice(WARNING, Reason.INSTANCE_TERMINATING, "Instance is terminating"),
    interruption.Kind.SCHEDULED_CHANGE: Notice(
        WARNING, Reason.INSTANCE_UNHEALTHY, "An unhealthy warning was triggered for the instance"
    ),
    interruption.Kind.CAPACITY_RESERVATION_INTERRUPTION: Notice(
        WARNING, Reason.CAPACITY_RESERVATION_INTERRUPTED, "Capacity reservation interruption warning was triggered"
    ),
}
_NOTICES = {
    **_NOTICES,
    interruption.Kind.INSTANCE_STATUS: _NOTICES[interruption.Kind.SCHEDULED_CHANGE],
    interruption.Kind.SYSTEM_STATUS: _NOTICES[interruption.Kind.SCHEDULED_CHANGE],
}

TERMINATING = Notice(WARNING, Reason.TERMINATING_ON_INTERRUPTION, "Interruption triggered termination for the {kind}")
"""Recorded when the handler deletes a NodeClaim; `{kind}` is NodeClaim or Node, as upstream words it."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the handler needs to know about one NodeClaim."""

    nodeclaim: str
    uid: str = ""
    node: str = ""
    nodepool: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    deleting: bool = False
    termination_time_set: bool = False  # karpenter.sh/nodeclaim-termination-timestamp is already there
    reservation_id: str = ""  # karpenter.k8s.aws/capacity-reservation-id: the reservation it was launched into


@dataclass(frozen=True, slots=True)
class UnavailableOffering:
    """A key of the provider's unavailable-offerings cache (`queue.OfferingMarker.mark`). `capacity_type` is the
    capacity pool: spot or on-demand, or for reserved capacity the reservation's id, since one reservation running
    dry leaves the type's other reservations and its on-demand capacity usable."""

    instance_type: str
    zone: str
    capacity_type: str


@dataclass(frozen=True, slots=True)
class Decision:
    target: Target
    notices: tuple[Notice, ...]  # events, in order
    delete: bool  # cordon and drain by deleting the NodeClaim
    unavailable: UnavailableOffering | None = None
    terminate_now: bool = False  # forceful: set the termination time to now first (even on a deleting claim)


def instance_id(provider_id: str) -> str:
    """`aws:///us-west-2a/i-0abc` → `i-0abc` (the last path segment; "" when there is none)."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if "/" in provider_id else ""


def target_of(claim: nodeclaim.NodeClaim) -> Target:
    lab = claim.metadata.labels
    return Target(
        nodeclaim=claim.name,
        uid=claim.metadata.uid,
        node=claim.status.node_name,
        nodepool=lab.get(labels.LABEL_NODEPOOL, ""),
        instance_type=lab.get(labels.LABEL_INSTANCE_TYPE, ""),
        zone=lab.get(labels.LABEL_ZONE, ""),
        capacity_type=lab.get(labels.LABEL_CAPACITY_TYPE, ""),
        deleting=claim.metadata.deletion_timestamp is not None,
        termination_time_set=labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in claim.metadata.annotations,
        reservation_id=lab.get(labels.LABEL_CAPACITY_RESERVATION_ID, ""),
    )


def index_by_instance(claims: Iterable[nodeclaim.NodeClaim]) -> dict[str, Target]:
    """Instance id → NodeClaim, for the NodeClaims that launched (have a provider id)."""
    out: dict[str, Target] = {}
    for claim in claims:
        iid = instance_id(claim.status.provider_id)
        if iid:
            out[iid] = target_of(claim)
    return out


def replaces_on_rebalance(pool_annotations: Mapping[str, str]) -> bool:
    return pool_annotations.get(labels.ANNOTATION_REPLACE_ON_REBALANCE, "").strip().lower() == REPLACE_ON_REBALANCE


def decide(
    message: interruption.Message,
    targets: Mapping[str, Target],
    *,
    pool_annotations: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Decision]:
    """One decision per instance of `message` that belongs to a NodeClaim; unknown instances are ignored
    (not ours, or already gone)."""
    pool_annotations = pool_annotations or {}
    notice = _NOTICES.get(message.kind)
    if notice is None:  # NO_OP: filtered events
        return []
    out: list[Decision] = []
    for iid in message.instance_ids:
        target = targets.get(iid)
        if target is None:
            continue
        drain = message.action in (
            interruption.Action.CORDON_AND_DRAIN,
            interruption.Action.FORCEFUL_TERMINATION,
        ) or (
            message.kind is interruption.Kind.REBALANCE_RECOMMENDATION
            and replaces_on_rebalance(pool_annotations.get(target.nodepool, {}))
        )
        delete = drain and not target.deleting
        unavailable = _unavailable(message, target) if message.marks_offering_unavailable else None
        notices = (notice, TERMINATING) if delete else (notice,)
        terminate_now = message.action is interruption.Action.FORCEFUL_TERMINATION and not target.termination_time_set
        out.append(Decision(target, notices, delete, unavailable, terminate_now))
    return out


def _unavailable(message: interruption.Message, target: Target) -> UnavailableOffering | None:
    """The capacity pool the interrupted instance came from, when its labels name it."""
    if not (target.instance_type and target.zone):
        return None
    if message.kind is interruption.Kind.CAPACITY_RESERVATION_INTERRUPTION:
        if not target.reservation_id:
            return None
        return UnavailableOffering(target.instance_type, target.zone, target.reservation_id)
    return UnavailableOffering(target.instance_type, target.zone, labels.CAPACITY_TYPE_SPOT)
