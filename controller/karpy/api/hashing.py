"""Drift hashes: stable sha256 over canonical JSON of the hashed parts (Go's hashstructure bytes are not reproducible).

`nodepool_hash` covers spec.template minus upstream's `hash:"ignore"` fields (requirements); disruption, limits
and weight are not part of the template, so they never change it. `ec2nodeclass_hash` covers the spec minus the
selector terms and ipPrefixCount (also `hash:"ignore"` upstream) and the literal amiFamily, plus the resolved AMI
family. Set-like lists (taints, block devices) are hashed as sets, like hashstructure's SlicesAsSets. Versions are in
`labels`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from karpy.api import ec2nodeclass, manifest, nodepool


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _as_set(items: list[Any]) -> list[str]:
    return sorted(json.dumps(i, sort_keys=True) for i in items)


def nodepool_hash(np: nodepool.NodePool) -> str:
    spec = manifest.to_manifest(np)["spec"]["template"]
    template_spec = dict(spec["spec"])
    template_spec.pop("requirements", None)
    for field in ("taints", "startupTaints"):
        if field in template_spec:
            template_spec[field] = _as_set(template_spec[field])
    return _digest({"metadata": spec.get("metadata", {}), "spec": template_spec})


def ec2nodeclass_hash(nc: ec2nodeclass.EC2NodeClass) -> str:
    spec = dict(manifest.to_manifest(nc)["spec"])
    for ignored in (
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "capacityReservationSelectorTerms",
        "amiFamily",
        "ipPrefixCount",  # hash:"ignore" upstream: changing it does not drift existing nodes
    ):
        spec.pop(ignored, None)
    if "blockDeviceMappings" in spec:
        spec["blockDeviceMappings"] = _as_set(spec["blockDeviceMappings"])
    return _digest({"spec": spec, "amiFamily": nc.resolved_ami_family.value})
