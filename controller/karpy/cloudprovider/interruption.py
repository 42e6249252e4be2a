"""Domain interruption messages: what the queue told us about which instances, decoupled from EventBridge JSON.

Pure values. The AWS queue client (`karpy.cloudprovider.aws.interruption_queue`) parses EventBridge events into these;
the interruption reconciler decides what to do from `Message.action`, never from AWS field names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.StrEnum):
    """The EventBridge event kinds upstream handles (aws: pkg/controllers/interruption/messages/types.go)."""

    SPOT_INTERRUPTION = "SpotInterruption"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    INSTANCE_STOPPED = "InstanceStopped"
    INSTANCE_TERMINATED = "InstanceTerminated"
    SCHEDULED_CHANGE = "ScheduledChange"
    CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruption"
    INSTANCE_STATUS = "InstanceStatus"
    """DescribeInstanceStatus: the instance status check failed (no queue; aws: interruption/instancestatus)."""
    SYSTEM_STATUS = "SystemStatus"
    """DescribeInstanceStatus: the system status check failed (the host under the instance)."""
    NO_OP = "NoOp"


class Action(enum.StrEnum):
    """What the interruption controller does for a kind."""

    CORDON_AND_DRAIN = "CordonAndDrain"
    FORCEFUL_TERMINATION = "ForcefulTermination"
    """The instance is already broken: its NodeClaim's termination time is set to now before it is deleted, so
    the drain does not wait on PDBs or volume detachment that a dead node cannot honour."""
    NO_ACTION = "NoAction"


# Rebalance recommendations only raise an event upstream (opt-in replacement is a karpy extension decided by the
# reconciler from a NodePool annotation); no-ops are events the parser filtered out.
_ACTIONS: dict[Kind, Action] = {
    Kind.SPOT_INTERRUPTION: Action.CORDON_AND_DRAIN,
    Kind.REBALANCE_RECOMMENDATION: Action.NO_ACTION,
    Kind.INSTANCE_STOPPED: Action.CORDON_AND_DRAIN,
    Kind.INSTANCE_TERMINATED: Action.CORDON_AND_DRAIN,
    Kind.SCHEDULED_CHANGE: Action.CORDON_AND_DRAIN,
    Kind.CAPACITY_RESERVATION_INTERRUPTION: Action.CORDON_AND_DRAIN,
    Kind.INSTANCE_STATUS: Action.FORCEFUL_TERMINATION,
    Kind.SYSTEM_STATUS: Action.FORCEFUL_TERMINATION,
    Kind.NO_OP: Action.NO_ACTION,
}


@dataclass(frozen=True, slots=True)
class Message:
    """One interruption notice about zero or more instances.

    `event_time` is epoch seconds of the event (not of its receipt); `detail` is a short human description
    (state, health event code, ...) for events and logs.
    """

    kind: Kind
    instance_ids: tuple[str, ...]
    event_id: str = ""
    event_time: float | None = None
    detail: str = ""
    status_category: str = ""
    """The EC2 status-check category (InstanceStatus, SystemStatus, EventStatus) of a message the instance status
    poll made; "" for a message from the queue."""

    @property
    def action(self) -> Action:
        return _ACTIONS[self.kind]

    @property
    def marks_offering_unavailable(self) -> bool:
        """The capacity behind the instance is short, so new launches must avoid it for a while: a spot
        interruption marks (type, zone, spot) unavailable for 3 min, a capacity reservation interruption marks the
        reservation (aws: interruption handler `markUnavailableOfferings`)."""
        return self.kind in (Kind.SPOT_INTERRUPTION, Kind.CAPACITY_RESERVATION_INTERRUPTION)


@dataclass(frozen=True, slots=True)
class Received:
    """A message as received, with the opaque handle needed to delete it from the queue and how many times the
    queue has handed it out (SQS ApproximateReceiveCount; 1 for sources that are not queues)."""

    message: Message
    receipt_handle: str
    receive_count: int = 1


class DropReason(enum.StrEnum):
    """Why a message was deleted without being acted on (karpy_interruption_messages_dropped_total{reason})."""

    NOT_JSON = "not_json"
    """The body is not a JSON document (bad syntax, nesting too deep, an integer too long to read)."""
    MALFORMED = "malformed"
    """JSON, but not the shape of the EventBridge event it claims to be (`"affectedEntities": 5`)."""
    UNKNOWN_EVENT = "unknown_event"
    """An event of a source or type no rule of ours sends."""
    INTERNAL_ERROR = "internal_error"
    """Reading or acting on it raised an error that is not an API server or network failure (a karpy bug, logged
    with its traceback): a retry would fail the same way."""
    RETRIES_EXHAUSTED = "retries_exhausted"
    """Acting on it kept failing (API server or network errors) until the receive limit."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A message the queue client could not turn into a `Message`: deleted as poison, never retried."""

    receipt_handle: str
    reason: DropReason
    detail: str
    """What was wrong, short (never the body itself)."""
    message_id: str = ""
