"""CapacityBuffers in a simulation: each buffer of the manifests resolved against the PodTemplate or workload the
manifests hold, sized and turned into virtual pods as the controller's buffer controller does
(`karpy.capacitybuffer.resolve`), so the plan launches their room as the provisioner would (core:
pkg/controllers/capacitybuffer, provisioning/provisioner.go GetPendingPods). A claim holding only virtual pods says
so (`REASON`); a buffer that does not resolve is listed with why, and keeps no room."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpy.api import capacitybuffer, meta
from karpy.capacitybuffer import resolve
from karpy.scheduling import pods, results

REASON: Final = "CapacityBuffer: spare room the controller keeps for the buffer's virtual pods"


@dataclass(frozen=True, slots=True)
class Room:
    buffer: str
    """namespace/name."""
    replicas: int
    ready: bool
    reason: str
    message: str
    placeholders: tuple[pods.Pod, ...]


def rooms(
    buffers: Sequence[capacitybuffer.CapacityBuffer],
    *,
    pod_templates: Mapping[tuple[str, str], Mapping[str, Any]],
    workloads: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> list[Room]:
    """Each buffer's room: `pod_templates` by (namespace, name), `workloads` by (kind, namespace, name)."""
    out = []
    for buffer in sorted(buffers, key=lambda b: (b.namespace, b.name)):
        got = _resolve(buffer, pod_templates, workloads)
        sized = resolve.size(buffer, got, now=0.0)
        ready = meta.condition(sized.status.conditions, capacitybuffer.READY_FOR_PROVISIONING)
        out.append(
            Room(
                f"{buffer.namespace}/{buffer.name}",
                len(sized.placeholders),
                sized.resolved,
                ready.reason if ready is not None else "",
                ready.message if ready is not None else "",
                tuple(sized.placeholders),
            )
        )
    return out


def _resolve(
    buffer: capacitybuffer.CapacityBuffer,
    pod_templates: Mapping[tuple[str, str], Mapping[str, Any]],
    workloads: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> resolve.Found:
    spec = buffer.spec
    if spec.pod_template_ref is not None:
        return resolve.from_pod_template(
            spec.pod_template_ref, pod_templates.get((buffer.namespace, spec.pod_template_ref))
        )
    ref = resolve.workload_ref(buffer)
    if isinstance(ref, resolve.Found):
        return ref
    obj = workloads.get((ref.kind, buffer.namespace, ref.name))
    return resolve.from_workload(ref, obj, plural=f"{ref.kind.lower()}s")


def room_keys(found: Sequence[Room]) -> dict[str, str]:
    """Virtual pod key -> its buffer."""
    return {p.key: r.buffer for r in found for p in r.placeholders}


def claim_reason(claim: results.PlannedNodeClaim, keys: Mapping[str, str]) -> str | None:
    """`REASON` for a claim that only a buffer's virtual pods need."""
    if claim.pods and all(p.key in keys for p in claim.pods):
        return REASON
    return None


def to_json(found: Sequence[Room]) -> list[dict[str, Any]]:
    return [
        {
            "name": r.buffer,
            "replicas": r.replicas,
            "ready": r.ready,
            "reason": r.reason,
            **({"message": r.message} if not r.ready else {}),
            "pods": sorted(p.key for p in r.placeholders),
        }
        for r in found
    ]


HEADERS: Final = ("BUFFER", "ROOM", "READY", "REASON")


def rows(found: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The table rows of `to_json`'s buffers, for `karpy simulate` and `karpy explain` alike."""
    return [
        [
            b["name"],
            str(b["replicas"]),
            "yes" if b["ready"] else "no",
            b["reason"] + (f": {b['message']}" if not b["ready"] else ""),
        ]
        for b in found
    ]
