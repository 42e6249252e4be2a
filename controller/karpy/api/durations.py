"""Go-style durations as the v1 API writes them ("720h", "1h30m", "0s", "Never") <-> float seconds."""

from __future__ import annotations

import re
from typing import Final

NEVER: Final = "Never"
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|h|m|s)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class DurationError(ValueError):
    """Text that is not a Go duration."""


def parse(text: str) -> float:
    """Seconds in a Go duration string such as "1h30m" or "0s" (schema patterns have already narrowed the form)."""
    if text in ("0", ""):
        if text == "0":
            return 0.0
        raise DurationError("empty duration")
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise DurationError(f"invalid duration {text!r}")
    return total


def parse_or_never(text: str) -> float | None:
    """Like `parse`, with "Never" meaning None (no deadline)."""
    return None if text == NEVER else parse(text)


def format(seconds: float | None) -> str:
    """The shortest h/m/s form ("720h", "1h30m", "45s", "0s"); None -> "Never". Sub-second parts are rounded."""
    if seconds is None:
        return NEVER
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
