"""What the emulated API server serves: kmock's bundled builtin resources plus karpenter's CRDs, and discovery.

Discovery is rebuilt here because kmock 0.8 reports the core group as `"/v1"` and gives subresources their
parent's kind and verbs; kubectl's RESTMapper and `kubectl drain` rely on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from karpy.api import capacitybuffer, labels, nodeoverlay
from karpy_emulator.apiserver import kmock_private

KUBERNETES_VERSION = "1.31"
"""The Kubernetes minor version the emulated cluster runs unless told otherwise (the AMIs seeded for it too)."""
_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Declaration:
    key: str  # group/version/plural ("v1/events" for the core group)
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()


CUSTOM: tuple[Declaration, ...] = (
    Declaration(
        f"{labels.GROUP}/{labels.VERSION}/nodepools", "NodePool", False, ("status", "scale"), (), ("karpenter",)
    ),
    Declaration(f"{labels.GROUP}/{labels.VERSION}/nodeclaims", "NodeClaim", False, ("status",), (), ("karpenter",)),
    Declaration(
        f"{labels.AWS_GROUP}/{labels.VERSION}/ec2nodeclasses",
        "EC2NodeClass",
        False,
        ("status",),
        ("ec2nc", "ec2ncs"),
        ("karpenter",),
    ),
    Declaration(
        f"{labels.GROUP}/{nodeoverlay.VERSION}/nodeoverlays",
        "NodeOverlay",
        False,
        ("status",),
        ("overlays",),
        ("karpenter",),
    ),
    Declaration(
        f"{capacitybuffer.API_VERSION}/{capacitybuffer.PLURAL}",
        capacitybuffer.KIND,
        True,
        ("status",),
        ("cb",),
        ("autoscaling",),
    ),
)
# Builtins a node autoscaler needs; declared only when kmock's bundled dump lacks them.
ENSURED: tuple[Declaration, ...] = (
    Declaration("coordination.k8s.io/v1/leases", "Lease", True),
    Declaration("policy/v1/poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), ("pdb",)),
    Declaration("storage.k8s.io/v1/volumeattachments", "VolumeAttachment", False, ("status",)),
    Declaration("storage.k8s.io/v1/storageclasses", "StorageClass", False, (), ("sc",)),
    Declaration("storage.k8s.io/v1/csinodes", "CSINode", False),
    Declaration("v1/events", "Event", True, (), ("ev",)),
    Declaration("events.k8s.io/v1/events", "Event", True, (), ("ev",)),
)

# Subresources whose kind is not the parent's: (group, version, kind, verbs).
_SUBRESOURCE_KINDS: Mapping[str, tuple[str, str, str, tuple[str, ...]]] = {
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "binding": ("", "v1", "Binding", ("create",)),
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
    "token": ("authentication.k8s.io", "v1", "TokenRequest", ("create",)),
}


def _singular(kind: str) -> str:
    return kind.lower()


def _info(declaration: Declaration) -> kmock.ResourceInfo:
    return kmock.ResourceInfo(
        kind=declaration.kind,
        singular=_singular(declaration.kind),
        namespaced=declaration.namespaced,
        verbs=set(_ALL_VERBS),
        shortnames=set(declaration.short_names),
        categories=set(declaration.categories),
        subresources=set(declaration.subresources),
    )


def declare(resources: kmock.ResourcesArray) -> None:
    """Load kmock's bundled builtins, then add the karpenter CRDs and any missing builtin we rely on."""
    resources.load_data(kmock_private.bundled_resources())
    for declaration in CUSTOM:
        resources[declaration.key] = _info(declaration)
    for declaration in ENSURED:
        if declaration.key not in resources:
            resources[declaration.key] = _info(declaration)


def custom_groups() -> frozenset[str]:
    return frozenset(kmock.resource(d.key).group or "" for d in CUSTOM)


def resource_list(
    group: str, version: str, entries: Iterable[tuple[kmock.resource, kmock.ResourceInfo]]
) -> dict[str, Any]:
    """The `APIResourceList` of one group/version, subresources with their own kinds and verbs."""
    listed: list[dict[str, Any]] = []
    for resource, info in sorted(entries, key=lambda entry: entry[0].plural or ""):
        kind = info.kind or (resource.plural or "").capitalize()
        listed.append(
            {
                "name": resource.plural,
                "singularName": info.singular or _singular(kind),
                "namespaced": bool(info.namespaced),
                "kind": kind,
                "verbs": sorted(info.verbs),
                "shortNames": sorted(info.shortnames),
                "categories": sorted(info.categories),
            }
        )
        for sub in sorted(info.subresources):
            entry: dict[str, Any] = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": bool(info.namespaced),
            }
            if sub in _SUBRESOURCE_KINDS:
                sub_group, sub_version, sub_kind, verbs = _SUBRESOURCE_KINDS[sub]
                entry.update(group=sub_group, version=sub_version, kind=sub_kind, verbs=list(verbs))
            else:
                entry.update(kind=kind, verbs=["get", "patch", "update"] if sub == "status" else ["get"])
            listed.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": listed,
    }


def git_version(kubernetes_version: str) -> str:
    """`v1.31.0-eks-emulated`: how the emulated API server and kubelets name `major.minor` (EKS's own builds read
    `v1.31.4-eks-<commit>`)."""
    return f"v{kubernetes_version}.0-eks-emulated"


def server_version(kubernetes_version: str) -> dict[str, str]:
    """The `/version` answer (apimachinery's version.Info) for `major.minor`."""
    major, minor = kubernetes_version.split(".", 1)
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version(kubernetes_version),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
