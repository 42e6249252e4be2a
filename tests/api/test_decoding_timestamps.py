"""`decoding.timestamp_or_none`: the one lenient reading of a manifest's RFC 3339 field (pod startTime, deletion and
creation timestamps, condition transition times, the NodeClaim termination-timestamp annotation)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import decoding


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-01T00:00:00Z", 1_704_067_200.0),
        ("2024-01-01T01:00:00+01:00", 1_704_067_200.0),
        ("2024-01-01T00:00:00", 1_704_067_200.0),  # no zone: UTC, as the strict reading takes it
        (None, None),
        ("", None),
        ("yesterday", None),
        (1_704_067_200, None),  # a number is not an RFC 3339 field
        ({"time": "2024-01-01T00:00:00Z"}, None),
    ],
)
def test_a_field_reads_as_epoch_seconds_or_none(value: Any, expected: float | None) -> None:
    assert decoding.timestamp_or_none(value) == expected
