"""Names, buckets and label spellings every metrics module shares (upstream's constants, in one place)."""

from __future__ import annotations

import re
from typing import Final

NAMESPACE: Final = "karpenter"
_DAY: Final = 24 * 3600.0
LIFETIME_BUCKETS: Final = (
    *(m * 60.0 for m in (15, 30, 45)), *(h * 3600.0 for h in (1, 2, 4, 6, 8, 10, 12, 16, 20)),
    *(d * _DAY for d in (1, 2, 3, 5, 10, 15, 20, 25, 30)),
)  # fmt: skip
"""Upstream's node lifetime buckets, 15 min to 30 days (core: node/termination/metrics.go)."""
MILLI_PER_UNIT: Final = 1000
DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
    120, 150, 300, 450, 600,
)  # fmt: skip
"""Upstream's buckets for duration histograms (core: pkg/metrics/constants.go `DurationBuckets`)."""
GO_DEFAULT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus's Go client `DefBuckets`, which upstream's histograms without buckets of their own get (Python's
default list differs)."""

_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(text: str) -> str:
    """`Underutilized` → `underutilized`, `InsufficientCapacity` → `insufficient_capacity` (upstream
    `pretty.ToSnakeCase`, which turns disruption reasons into reason label values)."""
    return _WORD_START.sub("_", text).lower()
