"""Fixtures of the end-to-end tests: an EmulatedCluster (moto + API server + stand-ins) on the autojump clock, and the
karpy controller against it (`controlplane.ControlPlane`, built by `karpy.wiring.graph`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.charts import rbac
from tests.e2e import support

from karpy_emulator import cluster, controlplane


@pytest.fixture(scope="session")
def chart_rbac() -> list[rbac.Rule]:
    """The rules charts/karpy binds to the controller's ServiceAccount, rendered once by the real helm."""
    return rbac.bound_rules(rbac.render(), service_account=rbac.SERVICE_ACCOUNT, namespace=rbac.NAMESPACE)


@pytest.fixture
async def emulated(
    request: pytest.FixtureRequest, chart_rbac: list[rbac.Rule]
) -> AsyncIterator[cluster.EmulatedCluster]:
    """The cluster; at the end, every request the controller sent must be one the chart's RBAC allows (and one the
    committed recording has: see tests/charts/rbac.py). A module or test marked `cluster(boot_delay=..., ...)` gets
    those ClusterOptions over the fast defaults (slower stand-ins where a scenario follows real timers)."""
    marker = request.node.get_closest_marker("cluster")
    overrides = marker.kwargs if marker is not None else {}
    async with cluster.EmulatedCluster(support.cluster_options(**overrides)) as running:
        yield running
        found = rbac.after_test(running.api.accesses.snapshot(), chart_rbac, test_id=request.node.nodeid)
        assert not found, "\n".join(found)


@pytest.fixture
async def controller(emulated: cluster.EmulatedCluster) -> AsyncIterator[controlplane.ControlPlane]:
    async with controlplane.ControlPlane(emulated, support.FAST) as running:
        yield running
