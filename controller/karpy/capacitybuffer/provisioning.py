"""What a provisioning pass tells the buffers (pure; core: pkg/controllers/provisioning/buffers.go): per buffer, how
many of its virtual pods fit existing capacity, needed a new NodeClaim or could not be placed, the Provisioning
condition that follows, and how many virtual pods each existing node holds (what emptiness reads)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from karpy.api import capacitybuffer, meta
from karpy.capacitybuffer import sizing
from karpy.nodeclaim import conditions
from karpy.scheduling import results

BufferOf = Callable[[str], "str | None"]
"""A pod key -> the buffer (`namespace/name`) it is a virtual pod of, or None for a real pod."""


@dataclass(slots=True)
class Placed:
    """One buffer's virtual pods in a pass (buffers.go bufferProvisioningStatus)."""

    existing: int = 0
    requires_new_claim: int = 0
    failed: int = 0


def counts_on_nodes(plan: results.Results, buffer_of: BufferOf) -> dict[str, int]:
    """Existing node -> virtual pods the pass placed on it (buffers.go bufferPodCountsFromResults)."""
    out: dict[str, int] = {}
    for node, placed in plan.existing_nodes.items():
        n = sum(1 for p in placed if buffer_of(p.key) is not None)
        if n:
            out[node] = n
    return out


def classify(plan: results.Results, buffer_of: BufferOf) -> dict[str, Placed]:
    """Buffer -> where its virtual pods went (buffers.go classifyBufferPods)."""
    out: dict[str, Placed] = collections.defaultdict(Placed)
    for placed in plan.existing_nodes.values():
        for p in placed:
            if (key := buffer_of(p.key)) is not None:
                out[key].existing += 1
    for claim in plan.new_nodeclaims:
        for p in claim.pods:
            if (key := buffer_of(p.key)) is not None:
                out[key].requires_new_claim += 1
    for pod_key in plan.unschedulable:
        if (key := buffer_of(pod_key)) is not None:
            out[key].failed += 1
    return dict(out)


def condition(buffer: capacitybuffer.CapacityBuffer, placed: Placed | None) -> tuple[str, str, str] | None:
    """(status, reason, message) of Provisioning after a pass, or None to leave it (buffers.go
    computeProvisioningCondition)."""
    ready = meta.condition(buffer.status.conditions, capacitybuffer.READY_FOR_PROVISIONING)
    if ready is None or ready.status != conditions.TRUE:
        return conditions.FALSE, sizing.REASON_NOT_READY_FOR_PROVISIONING, "Buffer is not ReadyForProvisioning"
    desired = buffer.status.replicas or 0
    if desired == 0:
        return conditions.FALSE, sizing.REASON_BUFFER_EMPTY, "Buffer has zero desired replicas"
    if placed is None:
        return None  # none of its pods were in this pass: nothing learned
    if placed.requires_new_claim or placed.failed:
        message = f"{placed.requires_new_claim}/{desired} virtual pods required new capacity, {placed.failed} failed"
        return conditions.FALSE, sizing.REASON_REQUIRES_NEW_CAPACITY, message
    if placed.existing == desired:
        return (
            conditions.TRUE,
            sizing.REASON_FITS_EXISTING_CAPACITY,
            f"All {desired} virtual pods fit on existing capacity",
        )
    return None
