"""Events the provisioner records on pods (pure; core: pkg/controllers/provisioning/scheduling/events.go)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from karpy import events
from karpy.scheduling import pods

NORMAL = events.EventType.NORMAL.value
WARNING = events.EventType.WARNING.value
REASON_NOMINATED = "Nominated"
REASON_FAILED_SCHEDULING = "FailedScheduling"


@dataclass(frozen=True, slots=True)
class PodEvent:
    pod: pods.Pod
    type: str
    reason: str
    message: str

    def involved_object(self) -> dict[str, Any]:
        """The reference the recorder attaches the Event to."""
        metadata = {"name": self.pod.name, "namespace": self.pod.namespace}
        if self.pod.uid:
            metadata["uid"] = self.pod.uid
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def nominated(pod: pods.Pod, *, node: str = "", nodeclaim: str = "") -> PodEvent:
    """The pod should land on an existing node or on a NodeClaim being launched for it."""
    targets = [f"{kind}/{name}" for kind, name in (("nodeclaim", nodeclaim), ("node", node)) if name]
    return PodEvent(pod, NORMAL, REASON_NOMINATED, f"Pod should schedule on: {', '.join(targets)}")


def failed_scheduling(pod: pods.Pod, reason: str) -> PodEvent:
    return PodEvent(pod, WARNING, REASON_FAILED_SCHEDULING, f"Failed to schedule pod, {reason}")
