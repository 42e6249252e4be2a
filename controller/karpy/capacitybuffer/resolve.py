"""A buffer's pod template and what sizing needs of it, from the objects its reference names (pure; core:
pkg/utils/apps/resolve.go ResolveCapacityBuffer). The controller fetches the PodTemplate or workload and `karpy
simulate` finds it among its manifests; both resolve, size and build the virtual pods here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from karpy.api import capacitybuffer, meta
from karpy.capacitybuffer import sizing
from karpy.scheduling import pods
from karpy.state import virtualpods

SCALABLE_KINDS: Final = frozenset(capacitybuffer.SCALABLE_KINDS)


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A resolution and the pod template it found (None when it failed)."""

    resolution: sizing.Resolution
    template: Mapping[str, Any] | None = None


def workload_ref(buffer: capacitybuffer.CapacityBuffer) -> capacitybuffer.ScalableRef | Found:
    """The workload to read for a buffer without a podTemplateRef, or the failed resolution when there is none or
    upstream refuses it (resolve.go ResolveScalableRef)."""
    ref = buffer.spec.scalable_ref
    if ref is None:
        return Found(sizing.Resolution(error=sizing.NO_REF_MESSAGE))
    if ref.api_group not in ("", "apps"):
        return Found(sizing.Resolution(error=f'unsupported scalableRef API group "{ref.api_group}"'))
    if ref.kind not in SCALABLE_KINDS:
        return Found(sizing.Resolution(error=f'unsupported kind "{ref.kind}"'))
    return ref


def not_found(resource: str, name: str) -> Found:
    """The API server's NotFound message, which upstream reports on ReadyForProvisioning."""
    return Found(sizing.Resolution(error=f'{resource} "{name}" not found', not_found=True))


def from_pod_template(name: str, obj: Mapping[str, Any] | None) -> Found:
    if obj is None:
        return not_found("podtemplates", name)
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    return found(obj.get("template") or {}, pod_template=name, generation=generation)


def from_workload(ref: capacitybuffer.ScalableRef, obj: Mapping[str, Any] | None, *, plural: str) -> Found:
    """A Deployment, StatefulSet or ReplicaSet's template and replicas (1 when unset, as upstream defaults it)."""
    if obj is None:
        return not_found(f"{plural}.apps", ref.name)
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas")
    return found(spec.get("template") or {}, scalable_replicas=1 if replicas is None else int(replicas))


def found(
    template: Mapping[str, Any],
    *,
    pod_template: str | None = None,
    generation: int | None = None,
    scalable_replicas: int | None = None,
) -> Found:
    try:
        # named: a template has no name of its own, and a pod must have one to be read
        md = {**(template.get("metadata") or {}), "name": virtualpods.pod_name("template", 0)}
        chunk = pods.from_manifest({"metadata": md, "spec": template.get("spec") or {}})
    except Exception as exc:  # a template the scheduler cannot read: the buffer says why
        return Found(sizing.Resolution(error=f"reading the pod template: {exc}"))
    return Found(
        sizing.Resolution(
            requests=dict(chunk.requests),
            pod_template=pod_template,
            pod_template_generation=generation,
            scalable_replicas=scalable_replicas,
        ),
        template,
    )


def placeholders(buffer: capacitybuffer.CapacityBuffer, template: Mapping[str, Any], replicas: int) -> list[pods.Pod]:
    return [
        pods.from_manifest(m)
        for m in virtualpods.manifests(
            namespace=buffer.namespace,
            name=buffer.name,
            uid=buffer.metadata.uid or f"{buffer.namespace}/{buffer.name}",
            template=template,
            replicas=replicas,
        )
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Sized:
    status: capacitybuffer.CapacityBufferStatus
    """The status the controller writes (controller.go resolveAndUpdateStatus, provisioningStrategy copied)."""
    resolved: bool
    """ReadyForProvisioning: the provisioner is triggered (and a simulation counts the buffer)."""
    placeholders: list[pods.Pod]
    """The virtual pods: `status.replicas` of them when resolved, else none."""


def size(buffer: capacitybuffer.CapacityBuffer, got: Found, *, now: float) -> Sized:
    wanted = sizing.resolved_status(buffer, got.resolution, now=now)
    wanted = dataclasses.replace(wanted, provisioning_strategy=buffer.spec.provisioning_strategy)
    ready = meta.condition(wanted.conditions, capacitybuffer.READY_FOR_PROVISIONING)
    resolved = ready is not None and ready.status == "True" and got.template is not None
    made = placeholders(buffer, got.template, wanted.replicas) if resolved and got.template and wanted.replicas else []
    return Sized(wanted, resolved, made)
