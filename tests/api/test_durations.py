"""The one Go-duration parser (`karpy.api.durations.parse`) reads what Go's time.ParseDuration reads, and refuses what
it refuses; the settings read their durations through it."""

from __future__ import annotations

import pytest

from karpy import settings
from karpy.api import durations

# Cases in the spirit of Go's own parse table (src/time/time_test.go, parseDurationTests), in seconds.
ACCEPTED = [
    ("0", 0.0),
    ("-0", 0.0),
    ("+0", 0.0),
    ("5s", 5.0),
    ("1478s", 1478.0),
    ("-5s", -5.0),
    ("+5s", 5.0),
    ("-0s", 0.0),
    ("5.0s", 5.0),
    ("5.6s", 5.6),
    ("5.s", 5.0),
    (".5s", 0.5),
    ("1.004s", 1.004),
    ("100.00100s", 100.001),
    ("10ns", 10e-9),
    ("11us", 11e-6),
    ("12\u00b5s", 12e-6),
    ("12\u03bcs", 12e-6),
    ("13ms", 0.013),
    ("15m", 900.0),
    ("16h", 57600.0),
    ("720h", 2592000.0),
    ("3h30m", 12600.0),
    ("10.5s4m", 250.5),
    ("-2m3.4s", -123.4),
    ("1h2m3s4ms5us6ns", 3723.004005006),
    ("39h9m14.425s", 140954.425),
]
REFUSED = ["", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "1m 30s", " 1s", "1sm", "1hm", "\u00b5s", "1.2.3s"]


@pytest.mark.parametrize(("text", "seconds"), ACCEPTED)
def test_reads_what_go_reads(text: str, seconds: float) -> None:
    assert durations.parse(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", REFUSED)
def test_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(durations.DurationError, match="is not a duration"):
        durations.parse(text)


@pytest.mark.parametrize(("text", "seconds"), [(t, s) for t, s in ACCEPTED if s >= 0] + [(" 10s ", 10.0)])
def test_settings_read_durations_with_the_same_parser(text: str, seconds: float) -> None:
    assert settings.parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", ["-5s", "-2m3.4s"])
def test_settings_refuse_negative_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration of zero or more"):
        settings.parse_duration(text)
