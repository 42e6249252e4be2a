"""Disruption budget schedules as robfig/cron's ParseStandard reads them (upstream's parser): the syntax check
`problem`, and `parse` / `next_time` to evaluate a schedule in UTC (descriptors expand to their five-field form)."""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
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


# Descriptor -> the five-field schedule robfig/cron expands it to.
_DESCRIPTOR_FIELDS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# robfig gives up after five years without a match (e.g. "0 0 30 2 *").
_SEARCH_YEARS: Final = 5


class CronError(ValueError):
    """A schedule that robfig/cron's ParseStandard would refuse (or that we do not evaluate, like @every)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed five-field schedule, evaluated in UTC. A field given as "*" or "?" (or "*/1") is `star`:
    when either day field is a star both must match, otherwise either may (cron's day-of-month OR day-of-week)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_star: bool
    weekday_star: bool

    def _day_matches(self, moment: datetime.datetime) -> bool:
        dom = moment.day in self.days
        dow = (moment.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow

    def next_time(self, after: float) -> float | None:
        """The first matching minute strictly after `after` (epoch seconds), or None when nothing matches within
        five years (robfig's zero time)."""
        start = (math.floor(after / 60) + 1) * 60
        moment = datetime.datetime.fromtimestamp(start, tz=datetime.UTC)
        limit = moment.year + _SEARCH_YEARS
        while moment.year <= limit:
            if moment.month not in self.months:
                moment = _first_of_next_month(moment)
                continue
            if not self._day_matches(moment):
                moment = moment.replace(hour=0, minute=0) + datetime.timedelta(days=1)
                continue
            if moment.hour not in self.hours:
                moment = moment.replace(minute=0) + datetime.timedelta(hours=1)
                continue
            if moment.minute not in self.minutes:
                moment += datetime.timedelta(minutes=1)
                continue
            return moment.timestamp()
        return None

    def matches(self, at: float) -> bool:
        """Whether the minute containing `at` is one the schedule fires in."""
        moment = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.month in self.months
            and self._day_matches(moment)
        )


def _first_of_next_month(moment: datetime.datetime) -> datetime.datetime:
    if moment.month == 12:
        return moment.replace(year=moment.year + 1, month=1, day=1, hour=0, minute=0)
    return moment.replace(month=moment.month + 1, day=1, hour=0, minute=0)


def parse(schedule: str) -> Schedule:
    """Parse a budget schedule (five fields or a descriptor; UTC). Raises CronError naming the problem."""
    reason = problem(schedule)
    if reason is not None:
        raise CronError(reason)
    text = schedule.strip()
    if text.startswith("@every"):
        raise CronError(f"{text!r}: @every schedules are not supported for budgets")
    text = _DESCRIPTOR_FIELDS.get(text, text)
    parsed = [
        _field_values(field, low, high, names)
        for field, (_, low, high, names) in zip(text.split(), _FIELDS, strict=True)
    ]
    return Schedule(
        minutes=parsed[0][0],
        hours=parsed[1][0],
        days=parsed[2][0],
        months=parsed[3][0],
        weekdays=parsed[4][0],
        day_star=parsed[2][1],
        weekday_star=parsed[4][1],
    )


def next_time(schedule: str, after: float) -> float | None:
    """`parse(schedule).next_time(after)`."""
    return parse(schedule).next_time(after)


def _field_values(field: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    """The values one field admits and whether it is a star (robfig's starBit: "*"/"?" with step 1)."""
    values: set[int] = set()
    star = False
    for part in field.split(","):
        body, slash, step_text = part.partition("/")
        step = int(step_text) if slash else 1
        if body in ("*", "?"):
            start, end = low, high
            star = star or step == 1
        else:
            start_text, dash, end_text = body.partition("-")
            start = _value(start_text, names) or 0
            end = (_value(end_text, names) or 0) if dash else (high if slash else start)
        values.update(range(start, end + 1, step))
    return frozenset(values), star
