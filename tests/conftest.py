"""Suite-wide: the per-test timeouts and the Hypothesis profiles (`hypothesis_profiles`: `full` unless pytest is
given `--hypothesis-profile=fast`, as `make test-fast` does).

pyproject.toml's `timeout` (300 s) is sized for the end-to-end scenarios; a unit test that runs for minutes is hung,
so everything else gets UNIT_TIMEOUT, but for the Hypothesis fuzz tests (FUZZ_TIMEOUT). A test that needs its own
says so with `@pytest.mark.timeout(...)`."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import settings
from tests import hypothesis_profiles

UNIT_TIMEOUT = 120.0
"""Seconds: the slowest unit test but the fuzz ones took 23 s at a load average of 10 on the 2 shared cores
(`pytest --durations`), so only a hang reaches it."""
FUZZ_TIMEOUT = 600.0
"""Seconds for tests/fuzz: its slowest test took 110 s at a load average of 10 (about 20 s on a quiet machine)."""

# Before Hypothesis's pytest plugin reads --hypothesis-profile (pytest_configure runs after this conftest is loaded).
hypothesis_profiles.register()
settings.load_profile(hypothesis_profiles.FULL)

TESTS = pathlib.Path(__file__).parent
E2E = TESTS / "e2e"
FUZZ = TESTS / "fuzz"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None or item.path.is_relative_to(E2E):
            continue
        seconds = FUZZ_TIMEOUT if item.path.is_relative_to(FUZZ) else UNIT_TIMEOUT
        item.add_marker(pytest.mark.timeout(seconds))
