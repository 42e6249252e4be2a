"""The Hypothesis profiles: `make test` runs every example, `make test-fast` a quarter, and neither has a deadline."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import settings
from tests import hypothesis_profiles

MAKEFILE = pathlib.Path(__file__).resolve().parents[1] / "Makefile"


@pytest.mark.parametrize(
    ("profile", "full", "expected"),
    [
        (hypothesis_profiles.FULL, 700, 700),
        (hypothesis_profiles.FULL, 5, 5),
        (hypothesis_profiles.FAST, 700, 175),
        (hypothesis_profiles.FAST, 300, 75),
        (hypothesis_profiles.FAST, 30, 10),  # a quarter would be 7: the floor
        (hypothesis_profiles.FAST, 5, 5),  # never more than the full count
        ("ci", 700, 700),  # an unknown profile is not the fast loop
    ],
)
def test_examples_scale_only_under_the_fast_profile(profile: str, full: int, expected: int) -> None:
    assert hypothesis_profiles.examples_under(profile, full) == expected


def test_the_profiles_have_no_deadline_and_fast_runs_a_quarter_of_the_default() -> None:
    full, fast = (settings.get_profile(name) for name in (hypothesis_profiles.FULL, hypothesis_profiles.FAST))
    assert full.deadline is None
    assert fast.deadline is None
    assert full.max_examples == hypothesis_profiles.HYPOTHESIS_DEFAULT
    assert fast.max_examples == hypothesis_profiles.HYPOTHESIS_DEFAULT // hypothesis_profiles.FAST_SHARE


def _recipe(target: str) -> str:
    """The target's recipe with the Makefile's own `NAME := value` variables expanded (one level, as written)."""
    text = MAKEFILE.read_text()
    found = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert found is not None, f"no `{target}` target in {MAKEFILE}"
    variables = dict(re.findall(r"^([A-Z_]+) :?= (.*)$", text, re.M))
    return re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m.group(1), m.group(0)), found.group(1))


def test_only_the_fast_loop_loads_the_fast_profile() -> None:
    assert "--hypothesis-profile=fast" in _recipe("test-fast")
    for target in ("test", "e2e"):
        assert "--hypothesis-profile" not in _recipe(target), f"`make {target}` runs the full profile"
