"""Fixtures of the end-to-end tests: an EmulatedCluster (moto + API server + stand-ins) on the wall clock, and the
karpy controller against it (`controlplane.ControlPlane`, built by `karpy.operator.wiring`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.e2e import support

from karpy.sim import cluster, controlplane


@pytest.fixture
async def emulated() -> AsyncIterator[cluster.EmulatedCluster]:
    options = cluster.ClusterOptions(cluster_name=support.CLUSTER, boot_delay=1.0, interval=0.5)
    async with cluster.EmulatedCluster(options) as running:
        yield running


@pytest.fixture
async def controller(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    async with controlplane.ControlPlane(emulated, support.FAST) as running:
        yield running
