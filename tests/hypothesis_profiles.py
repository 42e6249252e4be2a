"""The Hypothesis profiles: `full` (the default, what `make test` and CI run) and `fast` (`make test-fast`).

`fast` runs a quarter of every property test's examples, so the developer loop stays short while `make test` keeps
the whole search. A profile only sets the count of a test that names none; a test with a count of its own writes
`max_examples=hypothesis_profiles.examples(N)` so that the fast loop scales it too. Pick a profile with pytest's
`--hypothesis-profile=fast`; tests/conftest.py registers both and loads `full`.

Neither profile has a deadline: a deadline is a wall-clock assertion, which fails on a loaded machine for no fault
of the code under test (CONTRIBUTING.md: no test asserts on elapsed real time).
"""

from __future__ import annotations

from hypothesis import settings

FULL = "full"
FAST = "fast"
FAST_SHARE = 4
"""`fast` runs 1/FAST_SHARE of each test's examples."""
FAST_FLOOR = 10
"""The fewest examples a test runs under `fast` (or all of them, if it asks for fewer)."""
HYPOTHESIS_DEFAULT = 100
"""Hypothesis's own max_examples: what a test that names no count runs under `full`."""


def register() -> None:
    settings.register_profile(FULL, deadline=None)
    settings.register_profile(FAST, settings.get_profile(FULL), max_examples=examples_under(FAST, HYPOTHESIS_DEFAULT))


def examples(full: int) -> int:
    """How many examples a test that runs `full` of them under `make test` runs under the loaded profile."""
    return examples_under(settings.get_current_profile_name(), full)


def examples_under(profile: str, full: int) -> int:
    if profile != FAST:
        return full
    return max(min(full, FAST_FLOOR), full // FAST_SHARE)
