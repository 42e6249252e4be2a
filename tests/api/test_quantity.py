"""Quantities parse to exact milli-units the way apimachinery's resource.Quantity does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.api import quantity


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1", 1000),
        ("500m", 500),
        ("1.5", 1500),
        ("0.1", 100),
        ("2k", 2_000_000),
        ("1Ki", 1024 * 1000),
        ("1.5Gi", 3 * 2**29 * 1000),
        ("100Mi", 100 * 2**20 * 1000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("10u", 1),  # 0.00001 rounds up to one milli-unit, as MilliValue() does
        ("+3", 3000),
        (" 4 ", 4000),
        (7, 7000),
        (0.25, 250),
    ],
)
def test_parse(text: str | int | float, milli: int) -> None:
    assert quantity.parse(text) == milli


@pytest.mark.parametrize("bad", ["", "1.2.3", "Gi", "1Xi", "one", "1 Gi", True, float("nan")])
def test_parse_refuses_garbage(bad: str | float | bool) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(bad)


@pytest.mark.parametrize(
    ("name", "milli", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 3 * 2**30 * 1000, "3Gi"),
        ("memory", 1536 * 2**20 * 1000, "1536Mi"),
        ("memory", 1000 * 1000, "1000"),
        ("pods", 110_000, "110"),
        ("nvidia.com/gpu", 1000, "1"),
    ],
)
def test_format_resource(name: str, milli: int, text: str) -> None:
    assert quantity.format_resource(name, milli) == text


@given(st.integers(min_value=0, max_value=10**18), st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage"]))
def test_format_then_parse_is_identity(milli: int, name: str) -> None:
    assert quantity.parse(quantity.format_resource(name, milli)) == milli
