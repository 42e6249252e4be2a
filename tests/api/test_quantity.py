"""Quantities parse to exact milli-units the way apimachinery's resource.Quantity does."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

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
        ("5.", 5000),
        (".5", 500),
        ("1E", 10**18 * 1000),  # the exa suffix, not an exponent
        ("-1m", -1),
        ("-0.5m", 0),  # ceiling of a negative fraction
        # Beyond int64 milli-units, still exact (quantities the API server accepts at any magnitude):
        ("9Pi", 9 * 2**50 * 1000),
        ("1Ei", 2**60 * 1000),
        ("1e30", 10**33),
        ("123456789012345678901234567890", 123456789012345678901234567890000),
        ("1.000000000000000000000000000001", 1001),  # 31 significant digits: no 28-digit rounding
        pytest.param("0." + "0" * 1000 + "1", 1, id="tiny"),
        (1e30, 10**33),
        # Past 10^57 units every magnitude is held at the saturation bound, never computed digit by digit:
        ("1e999999999", quantity.SATURATED),
        ("-1e999999999", -quantity.SATURATED),
        pytest.param("1e" + "9" * 5000, quantity.SATURATED, id="5000-digit-exponent"),
        pytest.param("9" * 5000, quantity.SATURATED, id="5000-digit-string"),
        pytest.param(10**5000, quantity.SATURATED, id="5000-digit-int"),
        (1e300, quantity.SATURATED),
        ("1e-999999999", 1),
        ("-1e-999999999", 0),
    ],
)
def test_parse(text: str | int | float, milli: int) -> None:
    assert quantity.parse(text) == milli


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "got ''"),
        ("1.2.3", "got '1.2.3'"),
        ("Gi", "got 'Gi'"),
        ("1Xi", "got '1Xi'"),
        ("one", "got 'one'"),
        ("1 Gi", "got '1 Gi'"),
        ("1e2.5", "got '1e2.5'"),
        (".", "got '.'"),
        (True, "got boolean"),
        (None, "got null"),
        ([1], "got a list"),
        ({"a": 1}, "got an object"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        # The message quotes the start of a long string, not all of it:
        pytest.param("1" * 100_000 + "x", "(100001 characters)", id="long"),
    ],
)
def test_parse_refuses_garbage_with_a_short_message(bad: object, says: str) -> None:
    with pytest.raises(quantity.QuantityError) as caught:
        quantity.parse(bad)
    assert says in str(caught.value)
    assert len(str(caught.value)) < 300


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


@given(
    st.integers(min_value=-quantity.SATURATED, max_value=quantity.SATURATED),
    st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage"]),
)
def test_format_then_parse_is_identity(milli: int, name: str) -> None:
    assert quantity.parse(quantity.format_resource(name, milli)) == milli


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=None),
    st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "Ei", "n"]),
)
def test_parse_is_the_exact_ceiling_below_saturation(number: Decimal, suffix: str) -> None:
    """The reference: the exact rational value, rounded up to a milli-unit, held at the saturation bound."""
    factor = {"": 1, "m": Fraction(1, 1000), "k": 1000, "n": Fraction(1, 10**9)}.get(suffix)
    if factor is None:
        factor = 2 ** {"Ki": 10, "Mi": 20, "Gi": 30, "Ei": 60}[suffix]
    text = f"{number:f}{suffix}"
    exact = Fraction(number) * factor * 1000
    expected = max(-quantity.SATURATED, min(quantity.SATURATED, math.ceil(exact)))
    if abs(exact) >= quantity.SATURATED // 10:  # near the bound only the side of it matters
        assert quantity.parse(text) == expected or abs(quantity.parse(text)) == quantity.SATURATED
    else:
        assert quantity.parse(text) == expected
