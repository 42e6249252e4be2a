"""AMI aliases → public SSM parameter names, image requirements, and the newest image per requirement set. Pure.

Parameter layouts follow aws: pkg/providers/amifamily/{al2023,al2,bottlerocket,windows}.go.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import ec2nodeclass, labels, meta


class AliasError(ValueError):
    """An alias that names no family or version upstream supports."""


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter that resolves an alias for one (architecture, variant)."""

    name: str
    requirements: tuple[meta.NodeSelectorRequirement, ...]


def _req(key: str, op: meta.Operator, *values: str) -> meta.NodeSelectorRequirement:
    return meta.NodeSelectorRequirement(key=key, operator=op, values=tuple(values))


def _arch(arch: str) -> meta.NodeSelectorRequirement:
    return _req(labels.LABEL_ARCH, meta.Operator.IN, arch)


_NO_GPU = _req(labels.LABEL_INSTANCE_GPU_COUNT, meta.Operator.DOES_NOT_EXIST)
_NO_ACCEL = _req(labels.LABEL_INSTANCE_ACCELERATOR_COUNT, meta.Operator.DOES_NOT_EXIST)
_GPU = _req(labels.LABEL_INSTANCE_GPU_COUNT, meta.Operator.EXISTS)
_ACCEL = _req(labels.LABEL_INSTANCE_ACCELERATOR_COUNT, meta.Operator.EXISTS)
_WINDOWS = _req(labels.LABEL_OS, meta.Operator.IN, "windows")

EC2_ARCH = {"amd64": "x86_64", "arm64": "arm64"}
KUBE_ARCH = {"x86_64": "amd64", "x86_64_mac": "amd64", "arm64": "arm64", "arm64_mac": "arm64"}


def parse_alias(alias: str) -> tuple[ec2nodeclass.AMIFamily, str]:
    family_name, _, version = alias.partition("@")
    family = ec2nodeclass.ALIAS_FAMILIES.get(family_name.lower())
    if family is None or not version:
        raise AliasError(f"amiSelectorTerms.alias: {alias!r} is not family@version with a known family")
    if family.value.startswith("Windows") and version != "latest":
        raise AliasError(f"amiSelectorTerms.alias: {alias!r}: Windows aliases only support @latest")
    return family, version


def alias_parameters(alias: str, *, k8s_version: str) -> tuple[AliasParameter, ...]:
    """The SSM parameters to read for `alias` on a cluster of `k8s_version` (e.g. "1.31")."""
    family, version = parse_alias(alias)
    latest = version == "latest"
    match family:
        case ec2nodeclass.AMIFamily.AL2023:
            out = []
            for arch, variant, extra in (
                ("amd64", "standard", (_NO_GPU, _NO_ACCEL)),
                ("amd64", "nvidia", (_GPU,)),
                ("amd64", "neuron", (_ACCEL,)),
                ("arm64", "standard", (_NO_GPU, _NO_ACCEL)),
                ("arm64", "nvidia", (_GPU,)),
            ):
                ec2 = EC2_ARCH[arch]
                leaf = "recommended" if latest else f"amazon-eks-node-al2023-{ec2}-{variant}-{k8s_version}-{version}"
                base = f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023"
                out.append(AliasParameter(f"{base}/{ec2}/{variant}/{leaf}/image_id", (_arch(arch), *extra)))
            return tuple(out)
        case ec2nodeclass.AMIFamily.AL2:
            base = f"/aws/service/eks/optimized-ami/{k8s_version}"
            rows = (
                ("amazon-linux-2", "amazon-eks-node", (_arch("amd64"), _NO_GPU, _NO_ACCEL)),
                ("amazon-linux-2-gpu", "amazon-eks-gpu-node", (_arch("amd64"),)),
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node", (_arch("arm64"), _NO_GPU, _NO_ACCEL)),
            )
            return tuple(
                AliasParameter(
                    f"{base}/{path}/recommended/image_id"
                    if latest
                    else f"{base}/{path}/{prefix}-{k8s_version}-{version}/image_id",
                    reqs,
                )
                for path, prefix, reqs in rows
            )
        case ec2nodeclass.AMIFamily.BOTTLEROCKET:
            leaf = "latest" if latest else version.removeprefix("v")
            out = []
            for arch in ("amd64", "arm64"):
                ec2 = EC2_ARCH[arch]
                out.append(
                    AliasParameter(
                        f"/aws/service/bottlerocket/aws-k8s-{k8s_version}/{ec2}/{leaf}/image_id",
                        (_arch(arch), _NO_GPU, _NO_ACCEL),
                    )
                )
                out.append(
                    AliasParameter(
                        f"/aws/service/bottlerocket/aws-k8s-{k8s_version}-nvidia/{ec2}/{leaf}/image_id",
                        (_arch(arch), _GPU),
                    )
                )
            return tuple(out)
        case _:
            year = family.value.removeprefix("Windows")
            name = f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s_version}"
            return (AliasParameter(f"{name}/image_id", (_arch("amd64"), _WINDOWS)),)


def image_requirements(image: Mapping[str, Any]) -> tuple[meta.NodeSelectorRequirement, ...]:
    """Requirements of an image found by tags/id/name: its architecture (and Windows when it is Windows)."""
    reqs = [_arch(KUBE_ARCH.get(str(image.get("Architecture", "x86_64")), "amd64"))]
    if str(image.get("Platform", "")).lower() == "windows":
        reqs.append(_WINDOWS)
    return tuple(reqs)


def _epoch(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else 0.0


def newest_per_requirements(
    images: Iterable[tuple[Mapping[str, Any], tuple[meta.NodeSelectorRequirement, ...]]],
    *,
    now: float,
) -> tuple[ec2nodeclass.AMIStatus, ...]:
    """For each distinct requirement set, the newest image (non-deprecated preferred), newest first overall."""
    best: dict[tuple[meta.NodeSelectorRequirement, ...], tuple[tuple[bool, float, str], Mapping[str, Any]]] = {}
    for image, reqs in images:
        deprecation = str(image.get("DeprecationTime", ""))
        deprecated = bool(deprecation) and _epoch(deprecation) <= now
        rank = (not deprecated, _epoch(str(image.get("CreationDate", ""))), str(image.get("ImageId", "")))
        key = tuple(sorted(reqs, key=lambda r: (r.key, r.operator.value, r.values)))
        if key not in best or rank > best[key][0]:
            best[key] = (rank, image)
    ordered = sorted(best.items(), key=lambda kv: (-kv[1][0][1], kv[1][1].get("ImageId", "")))
    return tuple(
        ec2nodeclass.AMIStatus(
            id=str(image["ImageId"]),
            name=str(image.get("Name", "")),
            deprecated=not rank[0],
            requirements=reqs,
        )
        for reqs, (rank, image) in ordered
    )
