"""CapacityBuffer (`autoscaling.x-k8s.io/v1beta1`, namespaced, behind the CapacityBuffer feature gate): spare
capacity kept warm for a workload, as chunks shaped like one pod of a PodTemplate or of a scalable workload
(core: pkg/apis/autoscaling/v1beta1/capacitybuffer.go, constants.go). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from karpy.api import meta

GROUP: Final = "autoscaling.x-k8s.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "CapacityBuffer"
PLURAL: Final = "capacitybuffers"

ACTIVE_PROVISIONING_STRATEGY: Final = "buffer.x-k8s.io/active-capacity"
"""The default (and only) strategy: the buffer's chunks are placeholder pods the autoscaler provisions for."""

# Status condition types (core: pkg/apis/autoscaling/v1beta1/constants.go).
READY_FOR_PROVISIONING: Final = "ReadyForProvisioning"
PROVISIONING: Final = "Provisioning"
LIMITED_BY_QUOTAS: Final = "LimitedByQuotas"

# The scalableRef kinds upstream resolves (core: pkg/apis/autoscaling/v1beta1/constants.go).
SCALABLE_KINDS: Final = ("Deployment", "StatefulSet", "ReplicaSet")


@dataclass(frozen=True, slots=True)
class ScalableRef:
    """An object with a scale subresource in the buffer's namespace; `api_group` "" is the core group."""

    kind: str
    name: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class CapacityBufferSpec:
    provisioning_strategy: str = ACTIVE_PROVISIONING_STRATEGY
    pod_template_ref: str | None = None
    """The name of a PodTemplate in the buffer's namespace (exclusive with `scalable_ref`)."""
    scalable_ref: ScalableRef | None = None
    replicas: int | None = None
    percentage: int | None = None
    """Of the scalable workload's replicas, rounded up to at least one chunk."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Total requests the buffer's chunks may add up to, milli-units."""


@dataclass(frozen=True, slots=True)
class CapacityBufferStatus:
    pod_template_ref: str | None = None
    replicas: int | None = None
    pod_template_generation: int | None = None
    provisioning_strategy: str | None = None
    conditions: tuple[meta.Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class CapacityBuffer:
    metadata: meta.ObjectMeta
    spec: CapacityBufferSpec
    status: CapacityBufferStatus = field(default_factory=CapacityBufferStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
