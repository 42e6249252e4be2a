"""Public parsers: plain dicts (YAML or API server objects) -> frozen v1 dataclasses, or one ValidationError.

`nodepool`, `nodeclaim`, `ec2nodeclass` and `any` (dispatch on apiVersion/kind) validate against the CRD schema
(`karpy.api.schema`), apply its defaults, run the paired CEL predicates and the controller-side semantic checks,
and raise `errors.ValidationError` listing every problem with its field path. No other exception escapes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from karpy.api import (
    crdcheck,
    decode_ec2nodeclass,
    decoding,
    durations,
    errors,
    labels,
    semantics,
    validator,
)
from karpy.api import (
    ec2nodeclass as ec2nodeclass_api,
)
from karpy.api import (
    nodeclaim as nodeclaim_api,
)
from karpy.api import (
    nodeoverlay as nodeoverlay_api,
)
from karpy.api import (
    nodepool as nodepool_api,
)
from karpy.api.schema import core
from karpy.api.schema import ec2nodeclass as ec2nodeclass_schema
from karpy.api.schema import nodeclaim as nodeclaim_schema
from karpy.api.schema import nodeoverlay as nodeoverlay_schema
from karpy.api.schema import nodepool as nodepool_schema

T = TypeVar("T")
Decoder = Callable[[dict[str, Any], list[errors.Problem]], T]


@functools.cache
def _schema(kind: str) -> core.Schema:
    """The CRD schema of `kind`, built once: it is only read (the validator copies the defaults it applies), and
    building it cost as much as validating a NodeClaim against it."""
    builders: dict[str, Callable[[], core.Schema]] = {
        "NodePool": nodepool_schema.schema,
        "NodeClaim": nodeclaim_schema.schema,
        "EC2NodeClass": ec2nodeclass_schema.schema,
        "NodeOverlay": nodeoverlay_schema.schema,
    }
    return builders[kind]()


@functools.cache
def _validate(kind: str) -> crdcheck.Validate:
    """`validator.validate` against the CRD schema of `kind`, its fast path compiled once (`crdcheck`)."""
    return crdcheck.validate_with(_schema(kind))


def nodepool(obj: Mapping[str, Any]) -> nodepool_api.NodePool:
    return _parse(obj, "NodePool", f"{labels.GROUP}/{labels.VERSION}", _validate("NodePool"), _decode_nodepool)


def nodeclaim(obj: Mapping[str, Any]) -> nodeclaim_api.NodeClaim:
    return _parse(obj, "NodeClaim", f"{labels.GROUP}/{labels.VERSION}", _validate("NodeClaim"), _decode_nodeclaim)


def ec2nodeclass(obj: Mapping[str, Any]) -> ec2nodeclass_api.EC2NodeClass:
    return _parse(
        obj,
        "EC2NodeClass",
        f"{labels.AWS_GROUP}/{labels.VERSION}",
        _validate("EC2NodeClass"),
        decode_ec2nodeclass.decode,
    )


def nodeoverlay(obj: Mapping[str, Any]) -> nodeoverlay_api.NodeOverlay:
    return _parse(obj, "NodeOverlay", nodeoverlay_api.API_VERSION, _validate("NodeOverlay"), _decode_nodeoverlay)


def any(
    obj: Mapping[str, Any],
) -> nodepool_api.NodePool | nodeclaim_api.NodeClaim | ec2nodeclass_api.EC2NodeClass | nodeoverlay_api.NodeOverlay:
    """Parse whichever v1 kind `obj` declares; an unknown apiVersion/kind is a ValidationError naming `kind`."""
    if not isinstance(obj, Mapping):
        raise errors.ValidationError("object", "", [errors.Problem("", f"must be an object, got {_type(obj)}")])
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    parsers: dict[tuple[str, str], Callable[[Mapping[str, Any]], Any]] = {
        (f"{labels.GROUP}/{labels.VERSION}", "NodePool"): nodepool,
        (f"{labels.GROUP}/{labels.VERSION}", "NodeClaim"): nodeclaim,
        (f"{labels.AWS_GROUP}/{labels.VERSION}", "EC2NodeClass"): ec2nodeclass,
        (nodeoverlay_api.API_VERSION, "NodeOverlay"): nodeoverlay,
    }
    key = (api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
    if key is None or key not in parsers:
        supported = ", ".join(f"{v} {k}" for v, k in parsers)
        problem = errors.Problem(
            "kind", f"unsupported apiVersion/kind {api_version!r}/{kind!r} (supported: {supported})"
        )
        raise errors.ValidationError(str(kind) if kind else "object", _name(obj), [problem])
    result: (
        nodepool_api.NodePool | nodeclaim_api.NodeClaim | ec2nodeclass_api.EC2NodeClass | nodeoverlay_api.NodeOverlay
    ) = parsers[key](obj)
    return result


def _type(value: Any) -> str:
    return validator.type_name(value)


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def _parse(obj: Any, kind: str, api_version: str, validate: crdcheck.Validate, decode: Decoder[T]) -> T:
    if not isinstance(obj, Mapping):
        raise errors.ValidationError(kind, "", [errors.Problem("", f"must be an object, got {_type(obj)}")])
    problems: list[errors.Problem] = []
    for field, expected in (("apiVersion", api_version), ("kind", kind)):
        if obj.get(field) != expected:
            problems.append(errors.Problem(field, f"must be {expected!r}, got {obj.get(field)!r}"))
    body = {k: v for k, v in obj.items() if k != "metadata"}
    defaulted, schema_problems = validate(body)
    problems += [p for p in schema_problems if p.path not in ("apiVersion", "kind")]
    if "spec" not in defaulted and "spec" not in {p.path for p in problems}:
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


def _decode_nodepool(obj: dict[str, Any], problems: list[errors.Problem]) -> nodepool_api.NodePool:
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
    return nodepool_api.NodePool(
        metadata=obj["metadata"],
        template=nodepool_api.NodeClaimTemplate(
            node_class_ref=decoding.node_class_ref(tspec["nodeClassRef"]),
            requirements=decoding.requirements(tspec["requirements"]),
            labels=decoding.frozen_map(tmeta.get("labels")),
            annotations=decoding.frozen_map(tmeta.get("annotations")),
            taints=decoding.taints(tspec.get("taints")),
            startup_taints=decoding.taints(tspec.get("startupTaints")),
            expire_after=durations.parse_or_never(tspec["expireAfter"]),
            termination_grace_period=_optional_duration(tspec.get("terminationGracePeriod")),
        ),
        disruption=nodepool_api.Disruption(
            consolidation_policy=nodepool_api.ConsolidationPolicy(disruption["consolidationPolicy"]),
            consolidate_after=durations.parse_or_never(disruption["consolidateAfter"]),
            budgets=tuple(
                nodepool_api.Budget(
                    nodes=b["nodes"],
                    schedule=b.get("schedule"),
                    duration=_optional_duration(b.get("duration")),
                    reasons=tuple(nodepool_api.DisruptionReason(r) for r in b["reasons"]) if "reasons" in b else None,
                )
                for b in disruption["budgets"]
            ),
        ),
        limits=limits,
        weight=spec.get("weight"),
        replicas=spec.get("replicas"),
        status=nodepool_api.NodePoolStatus(
            resources=status_resources,
            nodes=status.get("nodes", 0),
            node_class_observed_generation=status.get("nodeClassObservedGeneration", 0),
            conditions=decoding.conditions(status.get("conditions")),
        ),
    )


def _decode_nodeclaim(obj: dict[str, Any], problems: list[errors.Problem]) -> nodeclaim_api.NodeClaim:
    # Upstream validates NodeClaims only by their CRD: every claim its API server stored must parse here, or karpy
    # could not account for the instance behind it.
    spec = obj["spec"]
    requests = decoding.resources(spec.get("resources", {}).get("requests"), "spec.resources.requests", problems)
    status = obj.get("status", {})
    last_event = status.get("lastPodEventTime")
    return nodeclaim_api.NodeClaim(
        metadata=obj["metadata"],
        spec=nodeclaim_api.NodeClaimSpec(
            node_class_ref=decoding.node_class_ref(spec["nodeClassRef"]),
            requirements=decoding.requirements(spec["requirements"]),
            taints=decoding.taints(spec.get("taints")),
            startup_taints=decoding.taints(spec.get("startupTaints")),
            resources=requests,
            expire_after=durations.parse_or_never(spec["expireAfter"]),
            termination_grace_period=_optional_duration(spec.get("terminationGracePeriod")),
        ),
        status=nodeclaim_api.NodeClaimStatus(
            node_name=status.get("nodeName", ""),
            provider_id=status.get("providerID", ""),
            image_id=status.get("imageID", ""),
            capacity=decoding.resources(status.get("capacity"), "status.capacity", problems),
            allocatable=decoding.resources(status.get("allocatable"), "status.allocatable", problems),
            conditions=decoding.conditions(status.get("conditions")),
            last_pod_event_time=decoding.timestamp(last_event) if last_event else None,
        ),
    )


def _decode_nodeoverlay(obj: dict[str, Any], problems: list[errors.Problem]) -> nodeoverlay_api.NodeOverlay:
    # Upstream's RuntimeValidate (core: pkg/apis/v1alpha1/nodeoverlay_validation.go): what the CRD cannot check of
    # the requirements; the validation controller reports an overlay refused here as ValidationSucceeded=False.
    spec = obj["spec"]
    semantics.requirements(spec["requirements"], "spec.requirements", semantics.Collector(problems))
    return nodeoverlay_api.NodeOverlay(
        metadata=obj["metadata"],
        spec=nodeoverlay_api.NodeOverlaySpec(
            requirements=decoding.requirements(spec["requirements"]),
            price=spec.get("price"),
            price_adjustment=spec.get("priceAdjustment"),
            capacity=decoding.resources(spec.get("capacity"), "spec.capacity", problems),
            weight=spec.get("weight", 0),
        ),
        status=nodeoverlay_api.NodeOverlayStatus(
            conditions=decoding.conditions(obj.get("status", {}).get("conditions"))
        ),
    )


def _optional_duration(text: str | None) -> float | None:
    return durations.parse(text) if text is not None else None
