"""Syntax check of disruption budget schedules, as robfig/cron's ParseStandard accepts them (upstream parser)."""

from __future__ import annotations

import re
from typing import Final

DESCRIPTORS: Final = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MONTH_NAMES: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS: Final = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
_DAYS: Final = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (name, minimum, maximum, names) of the five standard fields.
_FIELDS: Final[tuple[tuple[str, int, int, dict[str, int]], ...]] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
_NUMBER = re.compile(r"^[0-9]+$")


def problem(schedule: str) -> str | None:
    """None when `schedule` parses, else why not (e.g. "hour: 24 is above the maximum 23")."""
    text = schedule.strip()
    if text.startswith("@"):
        if text.startswith("@every "):
            return (
                None
                if re.fullmatch(r"([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+", text[7:].strip())
                else (f"invalid @every duration {text[7:]!r}")
            )
        return None if text in DESCRIPTORS else f"unrecognized descriptor {text!r}"
    fields = text.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}"
    for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in field.split(","):
            reason = _range_problem(part, low, high, names, allow_question=name.startswith("day"))
            if reason:
                return f"{name}: {reason}"
    return None


def _value(text: str, names: dict[str, int]) -> int | None:
    if _NUMBER.match(text):
        return int(text)
    return names.get(text.lower())


def _range_problem(part: str, low: int, high: int, names: dict[str, int], *, allow_question: bool) -> str | None:
    body, _, step = part.partition("/")
    if step and (not _NUMBER.match(step) or int(step) == 0):
        return f"invalid step {step!r}"
    if body == "*" or (allow_question and body == "?"):
        return None
    start_text, dash, end_text = body.partition("-")
    start = _value(start_text, names)
    end = _value(end_text, names) if dash else start
    if start is None or end is None:
        return f"invalid value {body!r}"
    if start < low:
        return f"{start} is below the minimum {low}"
    if end > high:
        return f"{end} is above the maximum {high}"
    if start > end:
        return f"beginning of range {start} is after the end {end}"
    return None
