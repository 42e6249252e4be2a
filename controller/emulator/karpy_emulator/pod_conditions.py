"""The PodScheduled condition the kube-scheduler stand-in writes on a pod that fits nowhere.

`PodScheduled=False, reason=Unschedulable` is what makes a pod provisionable for the controller. It is written only
when its status, reason or message changed, as kube-scheduler's handleSchedulingFailure → updatePod does
(pkg/scheduler/schedule_one.go; pkg/api/v1/pod/util.go UpdatePodCondition: the times do not count).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy_emulator import kubelet

UNSCHEDULABLE = "Unschedulable"


def unschedulable_patch(pod: Mapping[str, Any], message: str, now: float) -> dict[str, Any] | None:
    """The status merge patch setting PodScheduled=False/Unschedulable; None when the pod already says so."""
    conditions = list((pod.get("status") or {}).get("conditions") or ())
    current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
        "False",
        UNSCHEDULABLE,
        message,
    ):
        return None
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": UNSCHEDULABLE,
        "message": message,
        "lastTransitionTime": kubelet.timestamp(now),
        "lastProbeTime": None,
    }
    others = [c for c in conditions if c.get("type") != "PodScheduled"]
    return {"status": {"phase": "Pending", "conditions": [*others, condition]}}
