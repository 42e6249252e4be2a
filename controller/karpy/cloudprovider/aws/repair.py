"""The Node conditions AWS calls unhealthy (aws: pkg/cloudprovider/cloudprovider.go `RepairPolicies`): the kubelet's
Ready condition, and the conditions the EKS node monitoring agent reports, each with how long it is tolerated."""

from __future__ import annotations

from typing import Final

from karpy.cloudprovider import types

MINUTE: Final = 60.0

REPAIR_POLICIES: Final[tuple[types.RepairPolicy, ...]] = (
    # the kubelet
    types.RepairPolicy("Ready", "False", 30 * MINUTE),
    types.RepairPolicy("Ready", "Unknown", 30 * MINUTE),
    # the EKS node monitoring agent
    types.RepairPolicy("AcceleratedHardwareReady", "False", 10 * MINUTE),
    types.RepairPolicy("StorageReady", "False", 30 * MINUTE),
    types.RepairPolicy("NetworkingReady", "False", 30 * MINUTE),
    types.RepairPolicy("KernelReady", "False", 30 * MINUTE),
    types.RepairPolicy("ContainerRuntimeReady", "False", 30 * MINUTE),
)
