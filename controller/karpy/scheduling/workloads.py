"""Expand workload manifests into the pending pods they would create, with deterministic names.

Deployment / ReplicaSet -> `replicas` pods `<name>-<i>`; StatefulSet -> `<name>-<i>` with one PVC per
volumeClaimTemplate named `<template>-<name>-<i>` (Kubernetes' naming); Job -> min(parallelism, completions) pods;
Pod -> itself; DaemonSet -> one daemon pod template (owner kind DaemonSet) used for per-node overhead.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from karpy.api import errors
from karpy.scheduling import pods

WORKLOAD_KINDS = frozenset({"Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet"})


def _template_pod(obj: Mapping[str, Any], name: str, *, owner_kind: str) -> dict[str, Any]:
    md = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping):
        raise errors.ValidationError(
            str(obj.get("kind")), str(md.get("name", "")), [errors.Problem("spec.template", "required")]
        )
    tmd = dict(template.get("metadata") or {})
    tmd.update(
        name=name,
        namespace=md.get("namespace") or "default",
        creationTimestamp=md.get("creationTimestamp"),
        ownerReferences=[{"kind": owner_kind, "name": md.get("name", ""), "controller": True}],
    )
    return {"metadata": tmd, "spec": copy.deepcopy(dict(template.get("spec") or {}))}


def _count(value: Any, path: str, kind: str, name: str, *, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.ValidationError(
            kind, name, [errors.Problem(path, f"must be a non-negative integer, got {value!r}")]
        )
    return value


def expand(obj: Mapping[str, Any]) -> list[pods.Pod]:
    """The pods `obj` stands for (pending, unbound). Raises ValidationError on bad input or unknown kinds."""
    kind = str(obj.get("kind", ""))
    md = obj.get("metadata") or {}
    name = str(md.get("name", ""))
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return [pods.from_manifest(obj)]
    if kind not in WORKLOAD_KINDS:
        raise errors.ValidationError(kind or "object", name, [errors.Problem("kind", f"unsupported kind {kind!r}")])
    if not name:
        raise errors.ValidationError(kind, name, [errors.Problem("metadata.name", "required")])
    if kind == "DaemonSet":
        return [pods.from_manifest(_template_pod(obj, f"{name}-daemon", owner_kind=kind))]
    if kind == "Job":
        parallelism = _count(spec.get("parallelism"), "spec.parallelism", kind, name, default=1)
        completions = spec.get("completions")
        replicas = (
            parallelism
            if completions is None
            else min(parallelism, _count(completions, "spec.completions", kind, name, default=1))
        )
    else:
        replicas = _count(spec.get("replicas"), "spec.replicas", kind, name, default=1)
    if replicas == 0:
        return []
    # Parse the template once; replicas differ only in identity and (for StatefulSets) claim names.
    first = pods.from_manifest(_template_pod(obj, f"{name}-0", owner_kind=kind))
    templates = [(tpl.get("metadata") or {}).get("name", "") for tpl in spec.get("volumeClaimTemplates") or []]
    out = []
    for i in range(replicas):
        pod_name = f"{name}-{i}"
        claims = tuple(f"{t}-{name}-{i}" for t in templates) if kind == "StatefulSet" else ()
        out.append(
            dataclasses.replace(
                first, name=pod_name, uid=f"{first.namespace}/{pod_name}", pvc_names=first.pvc_names + claims
            )
        )
    return out
