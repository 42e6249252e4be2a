"""Fixtures of the kube tests: the emulated API server (`karpy_emulator.apiserver`) and a `RestClient` on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from karpy import clock
from karpy.kube import credentials, rest
from karpy_emulator.apiserver import runner, server


@pytest.fixture
async def kube() -> AsyncIterator[runner.KubeAPIRunner]:
    async with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, clock=lambda: 1_700_000_000.0)) as served:
        yield served


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.bearer(kube.url, "t"), clock=clock.SystemClock()) as client:
        yield client
