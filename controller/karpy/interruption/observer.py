"""What the interruption loop tells while it handles queue messages: the Events about the NodeClaims and Nodes a
message names (aws: pkg/controllers/interruption/events/events.go) and the interruption metrics (aws:
pkg/controllers/interruption/metrics.go). One `Observer` per loop: the controller names what happened, the observer
says it as Events and series.
"""

from __future__ import annotations

from karpy import events
from karpy.api import labels
from karpy.cloudprovider import interruption
from karpy.interruption import handler


class Metrics:
    """What the poller counts, by name (aws: pkg/controllers/interruption/metrics.go). The operator's subclass binds
    each to its Prometheus series (`karpy.runtime.metrics.interruption`); this one counts nothing."""

    def received(self, kind: str) -> None:
        """A message of `kind` received (counter)."""

    def deleted(self, kind: str) -> None:
        """A message of `kind` deleted after handling (counter)."""

    def dropped(self, reason: str) -> None:
        """A message deleted without being acted on, for its `interruption.DropReason` (counter)."""

    def action(self, action: str, kind: str) -> None:
        """A NodeClaim acted on: CordonAndDrain, ForcefulTermination or NoAction (counter)."""

    def failed(self, kind: str) -> None:
        """Handling failed and the message was left for a retry (counter)."""

    def disrupted(self, kind: str, nodepool: str, capacity_type: str) -> None:
        """A NodeClaim whose deletion a message started (karpenter_nodeclaims_disrupted_total, whose reason upstream
        is the message kind)."""

    def latency(self, seconds: float) -> None:
        """Seconds from a queue message's event to the end of its handling, before it is deleted (aws:
        interruption/controller.go `MessageLatency`, karpenter_interruption_message_queue_duration_seconds)."""

    def unhealthy(self, category: str) -> None:
        """Once per instance of this cluster a status-poll finding is acted on, while it lasts (aws:
        interruption/instancestatus_controller.go, karpenter_interruption_instance_status_unhealthy_total)."""


class Observer:
    """The loop's voice: each method is one thing that happened to a message, told as upstream tells it."""

    def __init__(self, recorder: events.Recorder, metrics: Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def received(self, message: interruption.Message) -> None:
        self._metrics.received(message.kind.value)

    def dropped(self, reason: interruption.DropReason) -> None:
        """A message deleted from the queue without being acted on."""
        self._metrics.dropped(reason.value)

    def noticed(self, target: handler.Target, notice: handler.Notice) -> None:
        """The notice's Event on the NodeClaim and, when it has one, on its Node (users `kubectl describe` either),
        each deduplicated per object for the recorder's default 2 minutes: upstream's carry the object's UID as their
        dedupe value (aws: pkg/controllers/interruption/events/events.go), so a message delivered twice (SQS is
        at-least-once) or an EventBridge rule and a status check telling the same is told once."""
        claim_md = {"name": target.nodeclaim, **({"uid": target.uid} if target.uid else {})}
        claim_ref = {"apiVersion": f"{labels.GROUP}/{labels.VERSION}", "kind": "NodeClaim", "metadata": claim_md}
        text = notice.message.format(kind="NodeClaim")
        self._recorder.record(claim_ref, notice.type, notice.reason, text, dedupe=events.about(claim_ref))
        if target.node:
            node_ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": target.node}}
            text = notice.message.format(kind="Node")
            self._recorder.record(node_ref, notice.type, notice.reason, text, dedupe=events.about(node_ref))

    def acted(self, message: interruption.Message, action: interruption.Action) -> None:
        """What the message did to one of its NodeClaims (NoAction included)."""
        self._metrics.action(action.value, message.kind.value)

    def interrupted(self, message: interruption.Message, target: handler.Target) -> None:
        """The deletion of `target`'s NodeClaim was accepted: a disruption whose reason is the message kind."""
        self._metrics.disrupted(message.kind.value, target.nodepool, target.capacity_type)

    def handled(self, message: interruption.Message, *, acted: bool, now: float) -> None:
        """A message acted on without error: a status-poll finding that touched a NodeClaim is counted unhealthy,
        a queue message by the time from its event until now."""
        if message.status_category:
            if acted:  # the poll hands each finding over once while it lasts
                self._metrics.unhealthy(message.status_category)
        elif message.event_time is not None:
            self._metrics.latency(max(0.0, now - message.event_time))

    def failed(self, message: interruption.Message) -> None:
        """Handling failed; the message is left for a retry, or dropped if it had its last."""
        self._metrics.failed(message.kind.value)

    def deleted(self, message: interruption.Message) -> None:
        """A handled message deleted from the queue."""
        self._metrics.deleted(message.kind.value)
