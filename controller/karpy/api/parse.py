"""Public parsers: plain dicts (YAML or API server objects) -> frozen v1 dataclasses, or one ValidationError.

`nodepool`, `nodeclaim`, `ec2nodeclass`, `nodeoverlay`, `capacitybuffer` and `any` (dispatch on apiVersion/kind)
validate against the CRD schema (`karpy.api.schema`), apply its defaults, run the paired CEL predicates and the
controller-side semantic checks, and raise `errors.ValidationError` listing every problem with its field path. No
other exception escapes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from karpy.api import (
    capacitybuffer as api_capacitybuffer,
)
from karpy.api import (
    decode_ec2nodeclass,
    decoding,
    durations,
    errors,
    fingerprints,
    labels,
    semantics,
    validator,
)
from karpy.api import (
    ec2nodeclass as api_ec2nodeclass,
)
from karpy.api import (
    nodeclaim as api_nodeclaim,
)
from karpy.api import (
    nodeoverlay as api_nodeoverlay,
)
from karpy.api import (
    nodepool as api_nodepool,
)
from karpy.api.schema import capacitybuffer as schema_capacitybuffer
from karpy.api.schema import core
from karpy.api.schema import ec2nodeclass as schema_ec2nodeclass
from karpy.api.schema import nodeclaim as schema_nodeclaim
from karpy.api.schema import nodeoverlay as schema_nodeoverlay
from karpy.api.schema import nodepool as schema_nodepool

T = TypeVar("T")
Decoder = Callable[[dict[str, Any], list[errors.Problem]], T]


@functools.cache
def _schema(kind: str) -> core.Schema:
    """The CRD schema of `kind`, built once: it is only read (the validator copies the defaults it applies), and
    building it cost as much as validating a NodeClaim against it."""
    builders: dict[str, Callable[[], core.Schema]] = {
        "NodePool": schema_nodepool.schema,
        "NodeClaim": schema_nodeclaim.schema,
        "EC2NodeClass": schema_ec2nodeclass.schema,
        "NodeOverlay": schema_nodeoverlay.schema,
        "CapacityBuffer": schema_capacitybuffer.schema,
    }
    return builders[kind]()


@functools.cache
def _validate(kind: str) -> validator.Validate:
    """`validator.validate` against the CRD schema of `kind`, compiled once."""
    return validator.validate_with(_schema(kind))


def nodepool(obj: Mapping[str, Any]) -> api_nodepool.NodePool:
    return _parse(obj, "NodePool", f"{labels.GROUP}/{labels.VERSION}", _validate("NodePool"), _decode_nodepool)


CLAIM_MEMO_SIZE = 2048
"""NodeClaims (and, apart, their specs) remembered by fingerprint: a few times the claims a busy cluster writes
between two LISTs of them (the garbage collector's, every 2 minutes)."""
_claims: fingerprints.Memo[api_nodeclaim.NodeClaim] = fingerprints.Memo(CLAIM_MEMO_SIZE)
_claim_specs: fingerprints.Memo[api_nodeclaim.NodeClaimSpec] = fingerprints.Memo(CLAIM_MEMO_SIZE)


def nodeclaim(obj: Mapping[str, Any]) -> api_nodeclaim.NodeClaim:
    """A NodeClaim, from the one parsed before when `obj` is the same (a LIST after the watch, a GET after the
    event), or without validating its spec again when only that is the same (a status write: the status
    subresource cannot change the spec, and the CRD makes it immutable). Only valid objects and specs are
    remembered, so a bad object is read, and reported, afresh every time."""
    api_version = f"{labels.GROUP}/{labels.VERSION}"
    if type(obj) is not dict or type(obj.get("spec")) is not dict:
        return _parse(obj, "NodeClaim", api_version, _validate("NodeClaim"), _decode_nodeclaim)
    whole, spec_print = fingerprints.with_part(obj, "spec")
    claim = _claims.get(whole)
    if claim is not None:
        return claim
    spec = _claim_specs.get(spec_print)
    if spec is None:
        claim = _parse(obj, "NodeClaim", api_version, _validate("NodeClaim"), _decode_nodeclaim)
        _claim_specs.put(spec_print, claim.spec)
    else:
        known = spec

        def decode(defaulted: dict[str, Any], problems: list[errors.Problem]) -> api_nodeclaim.NodeClaim:
            return api_nodeclaim.NodeClaim(
                metadata=defaulted["metadata"], spec=known, status=_decode_nodeclaim_status(defaulted, problems)
            )

        claim = _parse(obj, "NodeClaim", api_version, _validate_without_spec("NodeClaim"), decode, spec_known=True)
    _claims.put(whole, claim)
    return claim


@functools.cache
def _validate_without_spec(kind: str) -> validator.Validate:
    """`_validate(kind)` of an object whose spec was validated before: the spec is left out and not required (no
    rule of the CRDs' roots reads it together with another field; the spec's own rules went with it)."""
    schema = dict(_schema(kind))
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "spec"}
    schema["required"] = [r for r in schema.get("required", ()) if r != "spec"]
    return validator.validate_with(schema)


def ec2nodeclass(obj: Mapping[str, Any]) -> api_ec2nodeclass.EC2NodeClass:
    return _parse(
        obj,
        "EC2NodeClass",
        f"{labels.AWS_GROUP}/{labels.VERSION}",
        _validate("EC2NodeClass"),
        decode_ec2nodeclass.decode,
    )


def nodeoverlay(obj: Mapping[str, Any]) -> api_nodeoverlay.NodeOverlay:
    return _parse(obj, "NodeOverlay", api_nodeoverlay.API_VERSION, _validate("NodeOverlay"), _decode_nodeoverlay)


def capacitybuffer(obj: Mapping[str, Any]) -> api_capacitybuffer.CapacityBuffer:
    return _parse(
        obj,
        api_capacitybuffer.KIND,
        api_capacitybuffer.API_VERSION,
        _validate(api_capacitybuffer.KIND),
        _decode_capacitybuffer,
    )


Parsed = (
    api_nodepool.NodePool
    | api_nodeclaim.NodeClaim
    | api_ec2nodeclass.EC2NodeClass
    | api_nodeoverlay.NodeOverlay
    | api_capacitybuffer.CapacityBuffer
)


def any(obj: Mapping[str, Any]) -> Parsed:
    """Parse whichever v1 kind `obj` declares; an unknown apiVersion/kind is a ValidationError naming `kind`."""
    if not isinstance(obj, Mapping):
        raise errors.ValidationError("object", "", [errors.Problem("", f"must be an object, got {_type(obj)}")])
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    parsers: dict[tuple[str, str], Callable[[Mapping[str, Any]], Any]] = {
        (f"{labels.GROUP}/{labels.VERSION}", "NodePool"): nodepool,
        (f"{labels.GROUP}/{labels.VERSION}", "NodeClaim"): nodeclaim,
        (f"{labels.AWS_GROUP}/{labels.VERSION}", "EC2NodeClass"): ec2nodeclass,
        (api_nodeoverlay.API_VERSION, "NodeOverlay"): nodeoverlay,
        (api_capacitybuffer.API_VERSION, api_capacitybuffer.KIND): capacitybuffer,
    }
    key = (api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
    if key is None or key not in parsers:
        supported = ", ".join(f"{v} {k}" for v, k in parsers)
        problem = errors.Problem(
            "kind", f"unsupported apiVersion/kind {api_version!r}/{kind!r} (supported: {supported})"
        )
        raise errors.ValidationError(str(kind) if kind else "object", _name(obj), [problem])
    result: Parsed = parsers[key](obj)
    return result


def _type(value: Any) -> str:
    return validator.type_name(value)


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def _parse(
    obj: Any, kind: str, api_version: str, validate: validator.Validate, decode: Decoder[T], *, spec_known: bool = False
) -> T:
    if not isinstance(obj, Mapping):
        raise errors.ValidationError(kind, "", [errors.Problem("", f"must be an object, got {_type(obj)}")])
    problems: list[errors.Problem] = []
    for field, expected in (("apiVersion", api_version), ("kind", kind)):
        if obj.get(field) != expected:
            problems.append(errors.Problem(field, f"must be {expected!r}, got {obj.get(field)!r}"))
    body = {k: v for k, v in obj.items() if k != "metadata" and not (spec_known and k == "spec")}
    defaulted, schema_problems = validate(body)
    problems += [p for p in schema_problems if p.path not in ("apiVersion", "kind")]
    if not spec_known and "spec" not in defaulted and "spec" not in {p.path for p in problems}:
        # EC2NodeClass's CRD admits an object without one, but nothing can be done with it
        problems.append(errors.Problem("spec", "Required value"))
    metadata = decoding.metadata(obj.get("metadata"), problems)
    if problems:
        raise errors.ValidationError(kind, metadata.name, problems)
    defaulted["metadata"] = metadata
    result = decode(defaulted, problems)
    if problems:
        raise errors.ValidationError(kind, metadata.name, problems)
    return result


def _decode_nodepool(obj: dict[str, Any], problems: list[errors.Problem]) -> api_nodepool.NodePool:
    spec = obj["spec"]
    template, disruption = spec["template"], spec["disruption"]
    tspec = template["spec"]
    tmeta = template.get("metadata", {})
    out = semantics.Collector(problems)
    semantics.requirements(tspec["requirements"], "spec.template.spec.requirements", out)
    semantics.template_labels(tmeta.get("labels", {}), "spec.template.metadata.labels", out)
    semantics.taints(tspec, "spec.template.spec", out)
    semantics.budgets(disruption["budgets"], "spec.disruption.budgets", out)
    limits = decoding.resources(spec.get("limits"), "spec.limits", problems)
    status = obj.get("status", {})
    status_resources = decoding.resources(status.get("resources"), "status.resources", problems)
    return api_nodepool.NodePool(
        metadata=obj["metadata"],
        template=api_nodepool.NodeClaimTemplate(
            node_class_ref=decoding.node_class_ref(tspec["nodeClassRef"]),
            requirements=decoding.requirements(tspec["requirements"]),
            labels=decoding.frozen_map(tmeta.get("labels")),
            annotations=decoding.frozen_map(tmeta.get("annotations")),
            taints=decoding.taints(tspec.get("taints")),
            startup_taints=decoding.taints(tspec.get("startupTaints")),
            expire_after=durations.parse_or_never(tspec["expireAfter"]),
            termination_grace_period=_optional_duration(tspec.get("terminationGracePeriod")),
        ),
        disruption=api_nodepool.Disruption(
            consolidation_policy=api_nodepool.ConsolidationPolicy(disruption["consolidationPolicy"]),
            consolidate_after=durations.parse_or_never(disruption["consolidateAfter"]),
            budgets=tuple(
                api_nodepool.Budget(
                    nodes=b["nodes"],
                    schedule=b.get("schedule"),
                    duration=_optional_duration(b.get("duration")),
                    reasons=tuple(api_nodepool.DisruptionReason(r) for r in b["reasons"]) if "reasons" in b else None,
                )
                for b in disruption["budgets"]
            ),
        ),
        limits=limits,
        weight=spec.get("weight"),
        replicas=spec.get("replicas"),
        status=api_nodepool.NodePoolStatus(
            resources=status_resources,
            nodes=status.get("nodes", 0),
            node_class_observed_generation=status.get("nodeClassObservedGeneration", 0),
            conditions=decoding.conditions(status.get("conditions")),
        ),
    )


def _decode_nodeclaim(obj: dict[str, Any], problems: list[errors.Problem]) -> api_nodeclaim.NodeClaim:
    # Upstream validates NodeClaims only by their CRD: every claim its API server stored must parse here, or karpy
    # could not account for the instance behind it.
    spec = obj["spec"]
    requests = decoding.resources(spec.get("resources", {}).get("requests"), "spec.resources.requests", problems)
    return api_nodeclaim.NodeClaim(
        metadata=obj["metadata"],
        spec=api_nodeclaim.NodeClaimSpec(
            node_class_ref=decoding.node_class_ref(spec["nodeClassRef"]),
            requirements=decoding.requirements(spec["requirements"]),
            taints=decoding.taints(spec.get("taints")),
            startup_taints=decoding.taints(spec.get("startupTaints")),
            resources=requests,
            expire_after=durations.parse_or_never(spec["expireAfter"]),
            termination_grace_period=_optional_duration(spec.get("terminationGracePeriod")),
        ),
        status=_decode_nodeclaim_status(obj, problems),
    )


def _decode_nodeclaim_status(obj: dict[str, Any], problems: list[errors.Problem]) -> api_nodeclaim.NodeClaimStatus:
    status = obj.get("status", {})
    last_event = status.get("lastPodEventTime")
    return api_nodeclaim.NodeClaimStatus(
        node_name=status.get("nodeName", ""),
        provider_id=status.get("providerID", ""),
        image_id=status.get("imageID", ""),
        capacity=decoding.resources(status.get("capacity"), "status.capacity", problems),
        allocatable=decoding.resources(status.get("allocatable"), "status.allocatable", problems),
        conditions=decoding.conditions(status.get("conditions")),
        last_pod_event_time=decoding.timestamp(last_event) if last_event else None,
    )


def _decode_nodeoverlay(obj: dict[str, Any], problems: list[errors.Problem]) -> api_nodeoverlay.NodeOverlay:
    # Upstream's RuntimeValidate (core: pkg/apis/v1alpha1/nodeoverlay_validation.go): what the CRD cannot check of
    # the requirements; the validation controller reports an overlay refused here as ValidationSucceeded=False.
    spec = obj["spec"]
    semantics.requirements(spec["requirements"], "spec.requirements", semantics.Collector(problems))
    return api_nodeoverlay.NodeOverlay(
        metadata=obj["metadata"],
        spec=api_nodeoverlay.NodeOverlaySpec(
            requirements=decoding.requirements(spec["requirements"]),
            price=spec.get("price"),
            price_adjustment=spec.get("priceAdjustment"),
            capacity=decoding.resources(spec.get("capacity"), "spec.capacity", problems),
            weight=spec.get("weight", 0),
        ),
        status=api_nodeoverlay.NodeOverlayStatus(
            conditions=decoding.conditions(obj.get("status", {}).get("conditions"))
        ),
    )


def _decode_capacitybuffer(obj: dict[str, Any], problems: list[errors.Problem]) -> api_capacitybuffer.CapacityBuffer:
    # Upstream checks a buffer by its CRD only; what it refers to is resolved by the buffer controller, which
    # reports a missing PodTemplate or workload on ReadyForProvisioning (core: pkg/controllers/capacitybuffer).
    spec, status = obj["spec"], obj.get("status", {})
    scalable = spec.get("scalableRef")
    return api_capacitybuffer.CapacityBuffer(
        metadata=obj["metadata"],
        spec=api_capacitybuffer.CapacityBufferSpec(
            provisioning_strategy=spec["provisioningStrategy"],
            pod_template_ref=spec["podTemplateRef"]["name"] if "podTemplateRef" in spec else None,
            scalable_ref=(
                api_capacitybuffer.ScalableRef(
                    kind=scalable["kind"], name=scalable["name"], api_group=scalable.get("apiGroup", "")
                )
                if scalable is not None
                else None
            ),
            replicas=spec.get("replicas"),
            percentage=spec.get("percentage"),
            limits=decoding.resources(spec.get("limits"), "spec.limits", problems),
        ),
        status=api_capacitybuffer.CapacityBufferStatus(
            pod_template_ref=status["podTemplateRef"]["name"] if "podTemplateRef" in status else None,
            replicas=status.get("replicas"),
            pod_template_generation=status.get("podTemplateGeneration"),
            provisioning_strategy=status.get("provisioningStrategy"),
            conditions=decoding.conditions(status.get("conditions")),
        ),
    )


def _optional_duration(text: str | None) -> float | None:
    return durations.parse(text) if text is not None else None
