"""A CapacityBuffer's size and status, as upstream's buffer controller computes them (core:
pkg/controllers/capacitybuffer/controller.go resolveAndUpdateStatus, computeReplicas; helpers.go). Pure: the
caller resolves the buffer's PodTemplate or scalable workload and passes what it found (`Resolution`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from karpy.api import capacitybuffer, meta
from karpy.nodeclaim import conditions

# Reasons on ReadyForProvisioning (core: pkg/controllers/capacitybuffer/constants.go).
REASON_RESOLVED: Final = "Resolved"
REASON_SCALABLE_REF_NOT_FOUND: Final = "ScalableRefNotFound"
REASON_POD_TEMPLATE_NOT_FOUND: Final = "PodTemplateNotFound"
REASON_RESOLUTION_FAILED: Final = "ResolutionFailed"
# Reasons the provisioner writes on Provisioning (same file).
REASON_FITS_EXISTING_CAPACITY: Final = "FitsExistingCapacity"
REASON_REQUIRES_NEW_CAPACITY: Final = "RequiresNewCapacity"
REASON_NOT_READY_FOR_PROVISIONING: Final = "NotReadyForProvisioning"
REASON_BUFFER_EMPTY: Final = "BufferEmpty"

RESOLVED_MESSAGE: Final = "Pod template resolved successfully"
NO_REF_MESSAGE: Final = "Neither podTemplateRef nor scalableRef is set"
_INT32_MAX: Final = 2**31 - 1


def limit_replicas(limits: Mapping[str, int], requests: Mapping[str, int]) -> int | None:
    """How many chunks of `requests` fit in `limits` (floor, the least over the resources both name; milli-units),
    or None when no limited resource is requested (the limits constrain nothing): helpers.go
    calculateLimitReplicas."""
    fits = [min(limit // requests[name], _INT32_MAX) for name, limit in limits.items() if requests.get(name, 0) > 0]
    return min(fits) if fits else None


def percentage_replicas(scalable_replicas: int, percentage: int) -> int:
    """`percentage` of the workload's replicas, rounded up (so at least 1 when both are positive, the floor
    upstream also states): helpers.go calculatePercentageReplicas."""
    return math.ceil(scalable_replicas * percentage / 100)


def replicas(
    spec: capacitybuffer.CapacityBufferSpec, requests: Mapping[str, int], *, scalable_replicas: int | None
) -> int:
    """The chunks the buffer asks for (controller.go computeReplicas, Cluster Autoscaler's semantics): the larger of
    `replicas` and the percentage of a scalable workload, capped by what fits in `limits`; limits alone when
    neither is set."""
    candidates = []
    if spec.percentage is not None and scalable_replicas:
        candidates.append(percentage_replicas(scalable_replicas, spec.percentage))
    if spec.replicas is not None:
        candidates.append(spec.replicas)
    capped = limit_replicas(spec.limits, requests) if spec.limits else None
    if capped is None:
        return max(candidates, default=0)
    return min(max(candidates), capped) if candidates else capped


@dataclass(frozen=True, slots=True)
class Resolution:
    """What resolving the buffer's reference found: the chunk's requests, and the PodTemplate's name and generation
    or the workload's replicas; `error` when it failed (`not_found`: the referent does not exist)."""

    requests: Mapping[str, int] | None = None
    pod_template: str | None = None
    pod_template_generation: int | None = None
    scalable_replicas: int | None = None
    error: str = ""
    not_found: bool = False


def with_condition(
    buffer: capacitybuffer.CapacityBuffer, type_: str, verdict: tuple[str, str, str], *, now: float
) -> tuple[meta.Condition, ...]:
    """The buffer's conditions with `type_` set to `verdict` (status, reason, message) for its generation."""
    state, reason, message = verdict
    return conditions.set_condition(
        buffer.status.conditions,
        type_,
        state,
        now=now,
        reason=reason,
        message=message,
        observed_generation=buffer.metadata.generation,
    )


def resolved_status(
    buffer: capacitybuffer.CapacityBuffer, found: Resolution, *, now: float
) -> capacitybuffer.CapacityBufferStatus:
    """The buffer's status after a resolution (controller.go resolveAndUpdateStatus): ReadyForProvisioning True
    with the replicas, or False with why; ready only when `found` has requests."""
    spec, status = buffer.spec, buffer.status

    def ready(state: str, reason: str, message: str) -> tuple[meta.Condition, ...]:
        return with_condition(buffer, capacitybuffer.READY_FOR_PROVISIONING, (state, reason, message), now=now)

    if spec.pod_template_ref is None and spec.scalable_ref is None:
        return replace(status, conditions=ready(conditions.FALSE, REASON_RESOLUTION_FAILED, NO_REF_MESSAGE))
    if found.requests is None:
        reason = REASON_RESOLUTION_FAILED
        if found.not_found:
            reason = REASON_POD_TEMPLATE_NOT_FOUND if spec.pod_template_ref else REASON_SCALABLE_REF_NOT_FOUND
        return replace(status, conditions=ready(conditions.FALSE, reason, found.error))
    uses_template = spec.pod_template_ref is not None
    return replace(
        status,
        pod_template_ref=found.pod_template if uses_template else None,
        pod_template_generation=found.pod_template_generation if uses_template else None,
        replicas=replicas(spec, found.requests, scalable_replicas=None if uses_template else found.scalable_replicas),
        conditions=ready(conditions.TRUE, REASON_RESOLVED, RESOLVED_MESSAGE),
    )
