"""Go-style durations as the v1 API writes them ("720h", "1h30m", "0s", "Never") <-> float seconds."""

from __future__ import annotations

import re
from typing import Final

NEVER: Final = "Never"
# Go's time.ParseDuration grammar: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ with at least one digit per part, "0" alone, and
# these units (both spellings of micro: U+00B5 and U+03BC).
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|h|m|s)")
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class DurationError(ValueError):
    """Text that is not a Go duration."""


def parse(text: str) -> float:
    """Seconds in a Go duration string ("1h30m", "500ms", "-1.5s", "0"), as Go's time.ParseDuration reads it: the
    one parser of the v1 API's durations, annotations and the controller's settings."""
    body = text[1:] if text[:1] in ("-", "+") else text
    sign = -1.0 if text[:1] == "-" else 1.0
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f'{text!r} is not a duration like "10s", "1m30s" or "500ms"')
    pos, total = 0, 0.0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise DurationError(f'{text!r} is not a duration like "10s", "1m30s" or "500ms"')
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return sign * total


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
