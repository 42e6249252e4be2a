"""The `/scale` subresource of a custom resource (autoscaling/v1 Scale), as the API server serves it for a CRD with
`subresources.scale`: karpy's NodePool CRD maps `.spec.replicas` and `.status.nodes` (karpy.api.crds), which is
what `kubectl scale nodepool <name> --replicas=N` reads and patches. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy_emulator.apiserver import api_status, objects


def of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Scale view of `obj`."""
    meta = objects.metadata(obj)
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    scale: dict[str, Any] = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: meta[k] for k in kept if k in meta},
        "spec": {},
        "status": {"replicas": int((obj.get("status") or {}).get("nodes") or 0)},
    }
    replicas = (obj.get("spec") or {}).get("replicas")
    if replicas is not None:
        scale["spec"]["replicas"] = replicas
    return scale


def applied(obj: Mapping[str, Any], scale: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` with the replicas of an updated Scale (and its resourceVersion, for the optimistic-concurrency check)."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        cause = api_status.Cause("spec.replicas", f"Invalid value: {replicas!r}: must be a non-negative integer")
        raise api_status.invalid("Scale", "autoscaling", str(objects.metadata(obj).get("name", "")), [cause])
    new = objects.clone(dict(obj))
    new.setdefault("spec", {})["replicas"] = replicas
    version = objects.metadata(scale).get("resourceVersion")
    if version:
        new["metadata"]["resourceVersion"] = version
    return new
