"""Suite-wide: the unit tests' timeout.

pyproject.toml's `timeout` (300 s) is sized for the end-to-end scenarios; a unit test that runs for minutes is hung,
so everything outside tests/e2e gets UNIT_TIMEOUT unless it asks for its own with `@pytest.mark.timeout(...)`."""

from __future__ import annotations

import pathlib

import pytest

UNIT_TIMEOUT = 120.0
"""Seconds: several times the slowest unit test under load (`pytest --durations`), so only a hang reaches it."""

E2E = pathlib.Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None and not item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))
