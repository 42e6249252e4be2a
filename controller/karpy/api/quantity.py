"""Kubernetes resource quantities as exact integers in milli-units.

Every resource amount in karpy is an `int` of milli-units (1 CPU = 1000, 1 GiB of memory = 1024**3 * 1000), so
arithmetic is exact, comparisons are cheap and vectors of quantities fit numpy int64 (1 PiB in milli-bytes is
about 1.1e18 < 9.2e18). Parsing follows apimachinery's resource.Quantity grammar (decimal and binary suffixes,
decimal exponents); values finer than a milli-unit are rounded up, as Quantity.MilliValue() does.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final

_BINARY: Final[dict[str, int]] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final[dict[str, int]] = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"^([+-]?[0-9]*\.?[0-9]+|[+-]?[0-9]+\.)(?:(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|n|u)|[eE]([+-]?[0-9]+))?$"
)

MILLI: Final = 1000
KI: Final = 1024 * MILLI
MI: Final = 1024**2 * MILLI
GI: Final = 1024**3 * MILLI


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse(value: str | int | float) -> int:
    """Parse a quantity ("500m", "1.5Gi", "2", 3, "1e3") into milli-units, rounding fractions up."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int):
        return value * MILLI
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity must be finite, not {value!r}")
        return int((Decimal(repr(value)) * MILLI).to_integral_value(ROUND_CEILING))
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"quantities must match the regular expression '{_QUANTITY.pattern}', got {value!r}")
    number, suffix, exponent = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"invalid quantity {value!r}") from exc
    if exponent is not None:
        amount = amount.scaleb(int(exponent))
    elif suffix in _BINARY:
        amount *= _BINARY[suffix]
    elif suffix == "m":
        amount /= 1000
    elif suffix == "u":
        amount /= 10**6
    elif suffix == "n":
        amount /= 10**9
    else:
        amount *= _DECIMAL[suffix or ""]
    return int((amount * MILLI).to_integral_value(ROUND_CEILING))


def format(milli: int, *, binary: bool = False) -> str:
    """Render milli-units as the shortest exact quantity string ("1500m", "2", "3Gi" when `binary`)."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if binary and units:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % _BINARY[suffix] == 0:
                return f"{units // _BINARY[suffix]}{suffix}"
    return str(units)


def format_resource(name: str, milli: int) -> str:
    """Render an amount the way kubectl shows that resource: memory and storage in binary units."""
    return format(milli, binary=name in {"memory", "ephemeral-storage", "storage"} or name.startswith("hugepages-"))
