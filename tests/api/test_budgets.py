"""Budget evaluation: cron next-fire times (table + Hypothesis against an independent minute scan), budget
activity windows and the allowed-disruptions min over the budgets that apply to a reason."""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests import builders, hypothesis_profiles

from karpy.api import budgets, cron, nodepool, parse

UTC = datetime.UTC


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: float = 0.0) -> float:
    return datetime.datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() + second


# 2024-01-01 is a Monday; 2024 is a leap year.
@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("@hourly", at(2024, 1, 1, 10, 0), at(2024, 1, 1, 11, 0)),  # strictly after an exact hit
        ("@hourly", at(2024, 1, 1, 10, 0, 0.5), at(2024, 1, 1, 11, 0)),
        ("@hourly", at(2024, 1, 1, 9, 59, 59.9), at(2024, 1, 1, 10, 0)),
        ("@daily", at(2024, 1, 1, 0, 0), at(2024, 1, 2)),
        ("@midnight", at(2024, 2, 28, 23, 59), at(2024, 2, 29)),
        ("@weekly", at(2024, 1, 1), at(2024, 1, 7)),  # next Sunday
        ("@monthly", at(2024, 1, 31, 12), at(2024, 2, 1)),
        ("@yearly", at(2024, 3, 1), at(2025, 1, 1)),
        ("@annually", at(2024, 12, 31, 23, 59), at(2025, 1, 1)),
        ("*/15 * * * *", at(2024, 1, 1, 0, 14), at(2024, 1, 1, 0, 15)),
        ("5/20 * * * *", at(2024, 1, 1, 0, 6), at(2024, 1, 1, 0, 25)),  # "N/step" means N-max/step
        ("0 9 * * mon-fri", at(2024, 1, 5, 10), at(2024, 1, 8, 9)),  # Friday after 9 -> Monday
        ("0 9 * * MON-FRI", at(2024, 1, 5, 10), at(2024, 1, 8, 9)),
        ("30 22 * * 6", at(2024, 1, 1), at(2024, 1, 6, 22, 30)),  # Saturday
        ("0 0 29 2 *", at(2024, 3, 1), at(2028, 2, 29)),  # next leap day
        ("0 0 1,15 * 1", at(2024, 1, 2), at(2024, 1, 8)),  # dom OR dow when neither is a star: Monday 8th
        ("0 0 1,15 * 1", at(2024, 1, 9), at(2024, 1, 15)),  # ... or the 15th
        ("0 0 */2 * 1", at(2024, 1, 1, 1), at(2024, 1, 3)),  # "*/2" is no star: OR -> 3rd (odd day)
        ("0 0 * * 1", at(2024, 1, 2), at(2024, 1, 8)),  # dom "*" is a star: AND -> only Mondays
        ("0 12 ? 6 ?", at(2024, 1, 1), at(2024, 6, 1, 12)),
        ("0 0 1 jan-mar *", at(2024, 3, 2), at(2025, 1, 1)),
        ("0 0 30 2 *", at(2024, 1, 1), None),  # never fires: robfig's zero time
        ("59 23 31 12 *", at(2024, 12, 31, 23, 59), at(2025, 12, 31, 23, 59)),
    ],
)
def test_next_time(schedule: str, after: float, expected: float | None) -> None:
    assert cron.next_time(schedule, after) == expected


@pytest.mark.parametrize("schedule", ["61 * * * *", "* * * *", "@fortnightly", "@every 1h", "* * * * 7", "1-0 * * * *"])
def test_unparseable_schedules_raise(schedule: str) -> None:
    with pytest.raises(cron.CronError):
        cron.parse(schedule)


# ---- Hypothesis: next_time agrees with a brute-force minute scan written from the generated field sets ----

_FIELD_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


@st.composite
def _field(draw: st.DrawFn, bounds: tuple[int, int]) -> tuple[str, frozenset[int], bool]:
    """(cron text, the values it admits, whether it is a star) for one field."""
    low, high = bounds
    kind = draw(st.sampled_from(["star", "step", "list", "range"]))
    if kind == "star":
        return "*", frozenset(range(low, high + 1)), True
    if kind == "step":
        step = draw(st.integers(2, max(2, (high - low) // 2)))
        return f"*/{step}", frozenset(range(low, high + 1, step)), False
    if kind == "list":
        values = draw(st.sets(st.integers(low, high), min_size=1, max_size=4))
        return ",".join(str(v) for v in sorted(values)), frozenset(values), False
    start = draw(st.integers(low, high))
    end = draw(st.integers(start, high))
    return f"{start}-{end}", frozenset(range(start, end + 1)), False


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[str, Callable[[datetime.datetime], bool]]:
    fields = [draw(_field(bounds)) for bounds in _FIELD_BOUNDS]
    (_, minutes, _), (_, hours, _), (_, days, day_star), (_, months, _), (_, weekdays, weekday_star) = fields

    def fires(m: datetime.datetime) -> bool:
        dom, dow = m.day in days, (m.weekday() + 1) % 7 in weekdays
        day_ok = (dom and dow) if (day_star or weekday_star) else (dom or dow)
        return m.minute in minutes and m.hour in hours and m.month in months and day_ok

    return " ".join(text for text, _, _ in fields), fires


_WINDOW_MINUTES = 8 * 24 * 60


@settings(max_examples=hypothesis_profiles.examples(30), deadline=None)
@given(_schedules(), st.floats(min_value=at(2020, 1, 1), max_value=at(2030, 1, 1)))
@example(case=("* * * * *", lambda _: True), after=at(2030, 1, 1) - 2e-7)  # a float just short of a minute
def test_next_time_matches_brute_force(case: tuple[str, Callable[[datetime.datetime], bool]], after: float) -> None:
    schedule, fires = case
    result = cron.next_time(schedule, after)
    # The minute from whole seconds: fromtimestamp rounds to microseconds, so 23:59:59.9999998 would read as midnight.
    first_minute = datetime.datetime.fromtimestamp(math.floor(after / 60) * 60, tz=UTC)
    expected = None
    for i in range(1, _WINDOW_MINUTES + 1):
        candidate = first_minute + datetime.timedelta(minutes=i)
        if fires(candidate):
            expected = candidate.timestamp()
            break
    if expected is not None:
        assert result == expected
    else:
        assert result is None or result > first_minute.timestamp() + _WINDOW_MINUTES * 60
    if result is not None:
        assert result > after
        assert result % 60 == 0
        assert fires(datetime.datetime.fromtimestamp(result, tz=UTC))


# ---- budgets ----

DAILY_NINE_FOR_TWO_HOURS = nodepool.Budget(nodes="0", schedule="0 9 * * *", duration=2 * 3600.0)


@pytest.mark.parametrize(
    ("now", "active"),
    [
        (at(2024, 1, 1, 8, 59, 59), False),
        (at(2024, 1, 1, 9, 0), True),  # next(07:00) == 09:00 <= now
        (at(2024, 1, 1, 10, 59, 59), True),
        (at(2024, 1, 1, 11, 0), False),  # next(09:00) is strictly after 09:00: tomorrow. The window is [09:00, 11:00)
        (at(2024, 1, 2, 9, 30), True),
    ],
)
def test_budget_window(now: float, active: bool) -> None:
    assert budgets.budget_is_active(DAILY_NINE_FOR_TWO_HOURS, now) is active


def test_budget_without_schedule_is_always_active() -> None:
    assert budgets.budget_is_active(nodepool.Budget(nodes="1"), at(2024, 1, 1))


def test_never_firing_schedule_is_active_like_upstream() -> None:
    never = nodepool.Budget(nodes="0", schedule="0 0 30 2 *", duration=3600.0)
    assert budgets.budget_is_active(never, at(2024, 1, 1))


NOON = at(2024, 1, 1, 12)
EMPTY, DRIFTED, UNDER = (
    nodepool.DisruptionReason.EMPTY,
    nodepool.DisruptionReason.DRIFTED,
    nodepool.DisruptionReason.UNDERUTILIZED,
)


@pytest.mark.parametrize(
    ("budget_list", "reason", "num_nodes", "expected"),
    [
        ((nodepool.Budget(),), EMPTY, 10, 1),  # default 10% of 10
        ((nodepool.Budget(),), EMPTY, 11, 2),  # ceil(1.1)
        ((nodepool.Budget(),), EMPTY, 1, 1),  # ceil(0.1): a 10% budget never blocks a small pool entirely
        ((nodepool.Budget(),), EMPTY, 0, 0),
        ((nodepool.Budget(nodes="0%"),), EMPTY, 100, 0),
        ((nodepool.Budget(nodes="100%"),), EMPTY, 7, 7),
        ((nodepool.Budget(nodes="5"),), EMPTY, 2, 5),  # integers are not capped by the node count
        ((nodepool.Budget(nodes="5"), nodepool.Budget(nodes="20%")), EMPTY, 50, 5),  # min
        ((nodepool.Budget(nodes="5"), nodepool.Budget(nodes="20%")), EMPTY, 10, 2),
        ((), EMPTY, 10, budgets.UNLIMITED),
        ((nodepool.Budget(nodes="0", reasons=(DRIFTED,)),), EMPTY, 10, budgets.UNLIMITED),  # not for this reason
        ((nodepool.Budget(nodes="0", reasons=(DRIFTED, EMPTY)),), EMPTY, 10, 0),
        ((nodepool.Budget(nodes="0", reasons=(DRIFTED,)), nodepool.Budget(nodes="3")), UNDER, 10, 3),
        ((DAILY_NINE_FOR_TWO_HOURS, nodepool.Budget(nodes="4")), EMPTY, 10, 4),  # inactive at noon
        ((dataclasses.replace(DAILY_NINE_FOR_TWO_HOURS, schedule="0 11 * * *"),), EMPTY, 10, 0),  # active at noon
        ((nodepool.Budget(nodes="3", schedule="not a cron", duration=60.0),), EMPTY, 10, 0),  # fail closed
        ((nodepool.Budget(nodes="3", duration=60.0),), EMPTY, 10, 0),  # duration without schedule: fail closed
        # A misconfigured budget fails every reason closed, not only its own (upstream MustGetAllowedDisruptions).
        ((nodepool.Budget(nodes="3", schedule="bad", duration=60.0, reasons=(DRIFTED,)),), EMPTY, 10, 0),
        ((nodepool.Budget(nodes="1000a%", reasons=(DRIFTED,)), nodepool.Budget(nodes="5")), EMPTY, 10, 0),
    ],
)
def test_allowed_disruptions(
    budget_list: tuple[nodepool.Budget, ...], reason: nodepool.DisruptionReason, num_nodes: int, expected: int
) -> None:
    # Set on the parsed pool: the table holds budgets the parser refuses (a bad cron), to show they fail closed.
    base = builders.parsed_nodepool()
    pool = dataclasses.replace(base, disruption=dataclasses.replace(base.disruption, budgets=budget_list))
    assert budgets.allowed_disruptions(pool, reason, num_nodes, NOON) == expected


def test_allowed_disruptions_on_a_parsed_pool() -> None:
    manifest = builders.nodepool(
        disruption={
            "consolidateAfter": "0s",
            "budgets": [
                {"nodes": "20%", "reasons": ["Empty", "Drifted"]},
                {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
            ],
        }
    )
    pool = parse.nodepool(manifest)
    monday_noon, saturday_noon = at(2024, 1, 1, 12), at(2024, 1, 6, 12)
    assert budgets.allowed_disruptions(pool, EMPTY, 12, monday_noon) == 0
    assert budgets.allowed_disruptions(pool, EMPTY, 12, saturday_noon) == 3  # ceil(2.4)
    assert budgets.allowed_disruptions(pool, UNDER, 12, saturday_noon) == budgets.UNLIMITED


# ---- upstream's cases (pkg/apis/v1/nodepool_budgets_test.go), each named by its `It` ----

UPSTREAM_NOW = at(2000, 6, 15, 12, 30, 30)  # a Thursday: "@weekly" (Sunday 00:00) is not in its hour
EVERY_MINUTE = {"schedule": "* * * * *", "duration": 3600.0}
UPSTREAM_BUDGETS = (
    nodepool.Budget(nodes="10", **EVERY_MINUTE),
    nodepool.Budget(nodes="100", **EVERY_MINUTE),
    nodepool.Budget(nodes="100%", **EVERY_MINUTE),
    nodepool.Budget(nodes="15", reasons=(DRIFTED, UNDER), **EVERY_MINUTE),
    nodepool.Budget(nodes="5", reasons=(DRIFTED,), **EVERY_MINUTE),
    nodepool.Budget(nodes="0", schedule="@weekly", duration=3600.0, reasons=(UNDER, DRIFTED, EMPTY)),
)
"""The suite's BeforeEach budgets; each case below edits some of them (by index), keeps a prefix, or adds some."""
ALL_REASONS = (EMPTY, UNDER, DRIFTED)


@pytest.mark.parametrize(
    ("edits", "keep", "extra", "expected"),
    [
        pytest.param(
            {5: {"schedule": "* * * * *"}},
            None,
            (),
            dict.fromkeys(ALL_REASONS, 0),
            id="should return 0 for all reasons if a budget is active for all reasons",
        ),
        pytest.param(
            {i: {"schedule": "@yearly", "duration": 3600.0} for i in range(len(UPSTREAM_BUDGETS))},
            None,
            (),
            dict.fromkeys(ALL_REASONS, budgets.UNLIMITED),
            id="should return MaxInt32 for all reasons when there are no active budgets",
        ),
        pytest.param(
            {3: {"schedule": "@yearly"}, 4: {"schedule": "@yearly"}},
            None,
            (),
            dict.fromkeys(ALL_REASONS, 10),
            id="should ignore reason-defined budgets when inactive",
        ),
        pytest.param(
            {},
            1,
            (),
            dict.fromkeys(ALL_REASONS, 10),
            id="should return the budget for all disruption reasons when undefined",
        ),
        pytest.param(
            {},
            None,
            (nodepool.Budget(nodes="4", reasons=(EMPTY,), **EVERY_MINUTE),),
            {EMPTY: 4, DRIFTED: 5, UNDER: 10},  # the budget without reasons caps Underutilized at 10, below its 15
            id="should get the minimum budget for each reason",
        ),
    ],
)
def test_upstream_allowed_disruptions_by_reason(
    edits: dict[int, dict[str, object]],
    keep: int | None,
    extra: tuple[nodepool.Budget, ...],
    expected: dict[nodepool.DisruptionReason, int],
) -> None:
    edited = [dataclasses.replace(b, **edits.get(i, {})) for i, b in enumerate(UPSTREAM_BUDGETS)]  # type: ignore[arg-type]
    budget_list = (*edited[:keep], *extra)
    base = builders.parsed_nodepool()
    pool = dataclasses.replace(base, disruption=dataclasses.replace(base.disruption, budgets=budget_list))
    assert {r: budgets.allowed_disruptions(pool, r, 100, UPSTREAM_NOW) for r in ALL_REASONS} == expected


@pytest.mark.parametrize(
    ("index", "edit", "expected"),
    [
        pytest.param(0, {"schedule": "@wrongly"}, 0, id="should return zero values if a schedule is invalid"),
        pytest.param(0, {"nodes": "1000a%"}, 0, id="should return zero values if a nodes value is invalid"),
        pytest.param(
            0,
            {"schedule": "@yearly", "duration": 3600.0},
            budgets.UNLIMITED,
            id="should return MaxInt32 when a budget is inactive",
        ),
        pytest.param(0, {}, 10, id="should return the int value when a budget is active"),
        pytest.param(2, {}, 100, id="should return the string value when a budget is active"),  # 100% of 100
    ],
)
def test_upstream_allowed_disruptions_of_one_budget(index: int, edit: dict[str, object], expected: int) -> None:
    budget = dataclasses.replace(UPSTREAM_BUDGETS[index], **edit)  # type: ignore[arg-type]
    assert budgets.budget_allowed(budget, 100, UPSTREAM_NOW) == expected
