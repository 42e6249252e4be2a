"""Fixtures for tests that run against the emulated API server: `kube` (served on 127.0.0.1) and `api` (a
RestClient on it). A test folder's conftest.py imports them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from karpy import clock
from karpy.kube import credentials, rest
from karpy_emulator.apiserver import runner, server

START = 1_700_000_000.0


@pytest.fixture
async def kube() -> AsyncIterator[runner.KubeAPIRunner]:
    async with runner.KubeAPIRunner(server.FakeKubeAPI(seed=11, clock=lambda: START)) as served:
        yield served


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    # The client's rate limiter runs on the wall clock: tests step only the controller's ManualClock.
    async with rest.RestClient(credentials.bearer(kube.url, "t"), clock=clock.SystemClock()) as client:
        yield client
