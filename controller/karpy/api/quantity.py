"""Kubernetes resource quantities as exact integers in milli-units.

Every resource amount in karpy is an `int` of milli-units (1 CPU = 1000, 1 GiB of memory = 1024**3 * 1000), so
arithmetic is exact and comparisons are cheap. Parsing follows apimachinery's resource.Quantity grammar
(pkg/api/resource/quantity.go: decimal and binary suffixes, integer decimal exponents); values finer than a
milli-unit are rounded up, as Quantity.MilliValue() does.

The API server accepts quantities of any magnitude (`1e30`, `9Pi`, `1e999999999`): every one of them parses, in
time linear in its length. Magnitudes below `SATURATED` (10^57 units) are exact; larger ones are held as exactly
±`SATURATED`, a bound no real capacity comes within forty orders of magnitude of, so every comparison a scheduler
makes against real capacity keeps its answer while the numbers stay small enough to print and to add up.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Context, Decimal, Inexact, Rounded
from typing import Final

_BINARY: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final[dict[str, int]] = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Sign, integer digits, fraction digits, then a suffix or an integer decimal exponent. Possessive digit runs never
# give digits back, so a failed match of a long string costs one pass, not one retry per digit.
_QUANTITY = re.compile(r"([+-]?)([0-9]*+)(?:\.([0-9]*+))?(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]++))?")
GRAMMAR: Final = "a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent"

MILLI: Final = 1000
KI: Final = 1024 * MILLI
MI: Final = 1024**2 * MILLI
GI: Final = 1024**3 * MILLI
SATURATION_DIGITS: Final = 60
SATURATED: Final = 10**SATURATION_DIGITS
"""The largest magnitude held exactly, in milli-units (10^57 units); anything larger is held as this value."""
_LOG10_2: Final = math.log10(2)


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse(value: object) -> int:
    """Parse a quantity ("500m", "1.5Gi", "2", 3, "1e3") into milli-units, rounding fractions up.

    Raises QuantityError for anything else (a list, null, a boolean, "1.2.3", NaN), never another exception."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"must be a quantity ({GRAMMAR}), got {_type_name(value)}")
    if isinstance(value, int):
        return _saturate(value * MILLI) if abs(value) < SATURATED else _saturate(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"must be a finite number, got {value!r}")
        value = repr(value)
    if len(value) <= _CACHED_LENGTH:
        return _parse_short(value)
    return _parse_text(value)


_CACHED_LENGTH: Final = 32


@functools.lru_cache(maxsize=4096)
def _parse_short(text: str) -> int:
    """Manifests repeat a handful of amounts ("250m", "512Mi") thousands of times: read each once."""
    return _parse_text(text)


def _parse_text(value: str) -> int:
    text = value.strip()
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise QuantityError(f"must be {GRAMMAR}, got {_shorten(value)!r}")
    sign, whole, fraction, suffix, exponent = match.groups()
    fraction = fraction or ""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return 0
    power10 = _DECIMAL.get(suffix or "", 0) if exponent is None else _exponent(exponent)
    power2 = _BINARY.get(suffix or "", 0)
    # |amount in milli-units| < 10^magnitude, and ≥ 10^(magnitude - 1) up to the binary factor's rounding.
    significant_whole = whole.lstrip("0")
    order = len(significant_whole) if significant_whole else len(digits) - len(fraction)
    magnitude = order + power10 + 3 + power2 * _LOG10_2
    negative = sign == "-"
    if magnitude > SATURATION_DIGITS + 1:
        return -SATURATED if negative else SATURATED
    if magnitude < -SATURATION_DIGITS:
        return 0 if negative else 1  # a positive amount rounds up to one milli-unit, a negative one up to zero
    scale = power10 + 3 - len(fraction)
    # Exact: the context holds every digit of the input and of the factors, and traps any rounding.
    context = Context(prec=len(digits) + 2 * SATURATION_DIGITS, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, Rounded])
    amount = context.multiply(Decimal(f"{sign}{digits}").scaleb(scale, context), Decimal(2**power2))
    return _saturate(int(amount.to_integral_value(ROUND_CEILING, context)))


def _exponent(text: str) -> int:
    """A decimal exponent, held to a range far beyond saturation so that a thousand-digit exponent stays cheap."""
    stripped = text.lstrip("+-").lstrip("0")
    if len(stripped) > 12:
        bound = 10**12
        return -bound if text.startswith("-") else bound
    return int(text)


def _saturate(milli: int) -> int:
    return max(-SATURATED, min(SATURATED, milli))


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def format(milli: int, *, binary: bool = False) -> str:
    """Render milli-units as the shortest exact quantity string ("1500m", "2", "3Gi" when `binary`)."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if binary and units:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % 2 ** _BINARY[suffix] == 0:
                return f"{units // 2 ** _BINARY[suffix]}{suffix}"
    return str(units)


def format_resource(name: str, milli: int) -> str:
    """Render an amount the way kubectl shows that resource: memory and storage in binary units."""
    return format(milli, binary=name in {"memory", "ephemeral-storage", "storage"} or name.startswith("hugepages-"))
