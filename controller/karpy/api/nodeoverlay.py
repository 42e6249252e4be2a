"""NodeOverlay (`karpenter.sh/v1alpha1`, cluster-scoped, behind the NodeOverlay feature gate): a price or price
adjustment and extra extended-resource capacity for the instance types its requirements select, as the scheduler
sees them (core: pkg/apis/v1alpha1/nodeoverlay.go). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from karpy.api import labels, meta

VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{labels.GROUP}/{VERSION}"

# Status condition types (core: pkg/apis/v1alpha1/nodeoverlay_status.go): Ready follows ValidationSucceeded.
VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
READY: Final = "Ready"
# Reasons the validation controller writes when ValidationSucceeded is False (core: pkg/controllers/nodeoverlay).
REASON_RUNTIME_VALIDATION: Final = "RuntimeValidation"
REASON_CONFLICT: Final = "Conflict"

# Set on a NodeClaim whose instance types carry an overlaid price or capacity (core: pkg/apis/v1alpha1/labels.go).
ANNOTATION_PRICE_OVERLAY_APPLIED: Final = f"{labels.GROUP}/price-overlay-applied"
ANNOTATION_CAPACITY_OVERLAY_APPLIED: Final = f"{labels.GROUP}/capacity-overlay-applied"

STANDARD_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
"""Resources a capacity overlay may not touch (core: v1.WellKnownResources)."""


@dataclass(frozen=True, slots=True)
class NodeOverlaySpec:
    requirements: tuple[meta.NodeSelectorRequirement, ...] = ()
    price: str | None = None
    """An absolute price ("0.42") for the matching offerings, as written."""
    price_adjustment: str | None = None
    """A signed change ("-0.5", "+10%", "-15%") to the matching offerings' prices, as written."""
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Extended resources added to the matching instance types' capacity, milli-units."""
    weight: int = 0
    """Higher weights win; an unset weight is 0."""

    @property
    def price_change(self) -> str | None:
        return self.price if self.price is not None else self.price_adjustment


@dataclass(frozen=True, slots=True)
class NodeOverlayStatus:
    conditions: tuple[meta.Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeOverlay:
    metadata: meta.ObjectMeta
    spec: NodeOverlaySpec
    status: NodeOverlayStatus = field(default_factory=NodeOverlayStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


def by_weight(overlays: Sequence[NodeOverlay]) -> list[NodeOverlay]:
    """Heaviest first; among equal weights the name later in the alphabet first (core: NodeOverlayList
    OrderByWeight), so the order, and which of two equal overlays wins, is the same on every pass."""
    return sorted(overlays, key=lambda o: (-o.spec.weight, _descending(o.name)))


def _descending(name: str) -> tuple[int, ...]:
    return (*(-ord(c) for c in name), 1)


def adjusted_price(price: float, change: str | None) -> float:
    """`price` after an overlay's `price` or `priceAdjustment` (core: cloudprovider/types.go AdjustedPrice): an
    unsigned value replaces it, a signed one adds to it, a signed percentage scales it; never below zero. `change`
    has passed the CRD's patterns."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    adjusted = price * (1 + float(change[:-1]) / 100) if change.endswith("%") else price + float(change)
    return max(adjusted, 0.0)
