"""The `karpenter.sh/do-not-disrupt` pod annotation (core: pkg/utils/pod/scheduling.go `IsDoNotDisruptActive`).

"true" protects the pod for ever. A positive Go duration ("30m", "1h30m") protects it for that long after it started
(`status.startTime`); a pod that has not started yet is protected, as upstream fails safe. Any other value, a zero or
negative duration included, is ignored. Disruption (candidates) and termination (drain) read it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from karpy.api import decoding, durations, labels

PROTECTS_FOR_EVER = "true"
INVALID: Final = "InvalidDoNotDisruptAnnotation"
UNTIL: Final = "DoNotDisruptUntil"
ELAPSED: Final = "DoNotDisruptGracePeriodElapsed"


@dataclass(frozen=True, slots=True)
class Notice:
    """The Event upstream publishes about a pod whose annotation it evaluates for disruption (core:
    pkg/utils/pod/events.go); `dedupe` is what makes two of them the same event."""

    type: str
    reason: str
    message: str
    dedupe: str


def start_time(pod: Mapping[str, Any]) -> float | None:
    """A pod manifest's `status.startTime` (None while absent or unreadable)."""
    return decoding.timestamp_or_none((pod.get("status") or {}).get("startTime"))


def active(value: str | None, *, started: float | None, now: float) -> bool:
    """Whether an annotation `value` protects a pod that started at `started` (None: not yet) at `now`."""
    if value is None:
        return False
    if value == PROTECTS_FOR_EVER:
        return True
    try:
        window = durations.parse(value)
    except durations.DurationError:
        return False
    if window <= 0:
        return False
    return started is None or now < started + window


def pod_active(pod: Mapping[str, Any], *, now: float) -> bool:
    """Whether a pod manifest's annotation protects it at `now` (whatever its phase; callers decide that)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return active(annotations.get(labels.ANNOTATION_DO_NOT_DISRUPT), started=start_time(pod), now=now)


def notice(pod: Mapping[str, Any], *, now: float) -> Notice | None:
    """The Event about `pod`'s duration-form annotation as evaluated at `now`: invalid (a Warning; the annotation is
    ignored), still protecting until a time, or elapsed. None for "true", no annotation, or a pod not started."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(labels.ANNOTATION_DO_NOT_DISRUPT)
    if value is None or value == PROTECTS_FOR_EVER:
        return None
    try:
        window = durations.parse(str(value))
        if window <= 0:
            raise durations.DurationError(f"duration must be positive, got {value!r}")
    except durations.DurationError as error:
        message = f"Invalid {labels.ANNOTATION_DO_NOT_DISRUPT} annotation: {error}, ignoring annotation"
        return Notice("Warning", INVALID, message, dedupe=str(error))
    started = start_time(pod)
    if started is None:
        return None
    if now < started + window:
        until = decoding.format_timestamp(started + window)
        message = f"The {labels.ANNOTATION_DO_NOT_DISRUPT} grace period will elapse at {until}"
        return Notice("Normal", UNTIL, message, dedupe=until)
    message = f"The {labels.ANNOTATION_DO_NOT_DISRUPT} grace period has elapsed, pod is now disruptable"
    return Notice("Normal", ELAPSED, message, dedupe="")
