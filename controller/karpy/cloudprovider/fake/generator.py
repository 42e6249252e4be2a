"""Synthetic instance types mirroring upstream's fake catalog (core: pkg/cloudprovider/fake/instancetype.go).

`instance_types(n)` is the benchmark catalog (`fake.InstanceTypes(400)` in upstream's scheduling benchmark): type i
has i+1 vCPU, 2(i+1) GiB and 10(i+1) pods. `new_instance_type` reproduces upstream's `NewInstanceType` defaults:
4 CPU / 4 GiB / 5 pods, amd64, kube-reserved 100m CPU + 10 MiB, and five offerings (spot in test-zone-1 and -2,
on-demand in test-zone-1, -2 and -3), all at `price_from_resources`.

One deliberate difference: upstream's fake types allow the OS set {linux, windows, darwin}; an `InstanceType`
here carries single-valued labels, so the OS is one value (linux unless given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from karpy.api import labels, quantity
from karpy.cloudprovider import types

# Labels upstream's fake registers as well-known (size: small|large, special: "optional" on large types, integer:
# the CPU count) so scheduling tests can use them.
LABEL_SIZE: Final = "size"
LABEL_EXOTIC: Final = "special"
LABEL_INTEGER: Final = "integer"
RESOURCE_GPU_VENDOR_A: Final = "fake.com/vendor-a"
RESOURCE_GPU_VENDOR_B: Final = "fake.com/vendor-b"
ZONES: Final = ("test-zone-1", "test-zone-2", "test-zone-3")

_DEFAULT_OFFERING_PLACES: Final = (
    (labels.CAPACITY_TYPE_SPOT, "test-zone-1"),
    (labels.CAPACITY_TYPE_SPOT, "test-zone-2"),
    (labels.CAPACITY_TYPE_ON_DEMAND, "test-zone-1"),
    (labels.CAPACITY_TYPE_ON_DEMAND, "test-zone-2"),
    (labels.CAPACITY_TYPE_ON_DEMAND, "test-zone-3"),
)
_OVERHEAD: Final = types.Overhead(
    kube_reserved=MappingProxyType({labels.RESOURCE_CPU: 100, labels.RESOURCE_MEMORY: 10 * quantity.MI})
)


def price_from_resources(resources: Mapping[str, int]) -> float:
    """0.1 per CPU + 0.1 per GB (10^9 bytes) of memory + 1.0 per fake GPU vendor present (upstream formula)."""
    price = 0.0
    for name, milli in resources.items():
        if name == labels.RESOURCE_CPU:
            price += 0.1 * milli / quantity.MILLI
        elif name == labels.RESOURCE_MEMORY:
            price += 0.1 * (milli / quantity.MILLI) / 1e9
        elif name in (RESOURCE_GPU_VENDOR_A, RESOURCE_GPU_VENDOR_B):
            price += 1.0
    return price


def default_offerings(price: float) -> tuple[types.Offering, ...]:
    return tuple(types.Offering(zone=zone, capacity_type=ct, price=price) for ct, zone in _DEFAULT_OFFERING_PLACES)


def new_instance_type(
    name: str,
    resources: Mapping[str, int] | None = None,
    *,
    offerings: Sequence[types.Offering] | None = None,
    arch: str = "amd64",
    os: str = "linux",
    extra_labels: Mapping[str, str] | None = None,
) -> types.InstanceType:
    """One fake type; unset cpu/memory/pods default to 4 / 4Gi / 5 and offerings to the five default places."""
    capacity = {
        labels.RESOURCE_CPU: 4 * quantity.MILLI,
        labels.RESOURCE_MEMORY: 4 * quantity.GI,
        labels.RESOURCE_PODS: 5 * quantity.MILLI,
    }
    capacity.update({k: v for k, v in (resources or {}).items() if v})
    cpu = capacity[labels.RESOURCE_CPU]
    large = cpu > 4 * quantity.MILLI and capacity[labels.RESOURCE_MEMORY] > 8 * quantity.GI
    shape_labels = {
        labels.LABEL_INSTANCE_TYPE: name,
        labels.LABEL_ARCH: arch,
        labels.LABEL_OS: os,
        LABEL_INTEGER: str(cpu // quantity.MILLI),
        LABEL_SIZE: "large" if large else "small",
    }
    if large:
        shape_labels[LABEL_EXOTIC] = "optional"
    shape_labels.update(extra_labels or {})
    return types.InstanceType(
        name=name,
        labels=MappingProxyType(shape_labels),
        capacity=MappingProxyType(capacity),
        offerings=tuple(offerings) if offerings else default_offerings(price_from_resources(capacity)),
        overhead=_OVERHEAD,
    )


def instance_types(total: int) -> list[types.InstanceType]:
    """Upstream's benchmark catalog: `fake-it-<i>` with i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, i in [0, total)."""
    return [
        new_instance_type(
            f"fake-it-{i}",
            {
                labels.RESOURCE_CPU: (i + 1) * quantity.MILLI,
                labels.RESOURCE_MEMORY: 2 * (i + 1) * quantity.GI,
                labels.RESOURCE_PODS: 10 * (i + 1) * quantity.MILLI,
            },
        )
        for i in range(total)
    ]


def default_instance_types() -> list[types.InstanceType]:
    """A small hand-made catalog covering the cases tests reach for: a default, a small, an arm64, two GPU vendors,
    a single-pod type and a Windows type (modelled on upstream's fake cloud provider defaults)."""
    return [
        new_instance_type("default-instance-type"),
        new_instance_type(
            "small-instance-type", {labels.RESOURCE_CPU: 2 * quantity.MILLI, labels.RESOURCE_MEMORY: 2 * quantity.GI}
        ),
        new_instance_type(
            "arm-instance-type",
            {labels.RESOURCE_CPU: 16 * quantity.MILLI, labels.RESOURCE_MEMORY: 128 * quantity.GI},
            arch="arm64",
        ),
        new_instance_type("gpu-vendor-instance-type", {RESOURCE_GPU_VENDOR_A: 2 * quantity.MILLI}),
        new_instance_type("gpu-vendor-b-instance-type", {RESOURCE_GPU_VENDOR_B: 2 * quantity.MILLI}),
        new_instance_type("single-pod-instance-type", {labels.RESOURCE_PODS: 1 * quantity.MILLI}),
        new_instance_type("windows-instance-type", os="windows"),
    ]
