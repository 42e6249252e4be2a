"""The taint-eviction stand-in (kube-controller-manager's pkg/controller/tainteviction) against the emulated API
server: pods on a NoExecute-tainted node go at once, after their smallest tolerationSeconds, or never.

The `eviction_delay` cases follow upstream's taint_eviction_test.go (TestGetMinTolerationTime and the
TestUpdateNode cases: untolerated taint, tolerated for a while, tolerated forever)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.api import meta
from karpy.kube import credentials, resources, rest
from karpy_emulator import reads, taint_manager
from karpy_emulator.apiserver import runner

NO_EXECUTE = "NoExecute"
TAINT = {"key": "maintenance", "value": "now", "effect": NO_EXECUTE}


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.bearer(kube.url, "tester"), clock=clock.SystemClock()) as client:
        yield client


@pytest.mark.parametrize(
    ("tolerations", "delay"),
    [
        ([], 0.0),  # not tolerated: now
        ([{"key": "maintenance", "operator": "Exists", "effect": NO_EXECUTE}], None),  # forever
        ([{"key": "maintenance", "operator": "Equal", "value": "now", "tolerationSeconds": 60}], 60.0),
        ([{"operator": "Exists", "tolerationSeconds": 30}, {"key": "maintenance", "operator": "Exists",
          "tolerationSeconds": 90}], 30.0),  # the smallest of the matching ones
        ([{"key": "maintenance", "operator": "Equal", "value": "later", "tolerationSeconds": 60}], 0.0),
        ([{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}], 0.0),  # other effect
        ([{"operator": "Exists", "tolerationSeconds": -5}], 0.0),  # negative: now
    ],
)  # fmt: skip
def test_eviction_delay(tolerations: list[dict[str, Any]], delay: float | None) -> None:
    taints = [meta.Taint(key="maintenance", value="now", effect=NO_EXECUTE)]
    assert taint_manager.eviction_delay(taints, tolerations) == delay


async def test_pods_leave_a_no_execute_node_as_their_tolerations_say(
    api: rest.RestClient, stand_in_reader: reads.Reader | None
) -> None:
    manual = clock.ManualClock(1_700_000_000.0)
    await api.create(resources.NODES, builders.node("tainted", taints=[TAINT]))
    await api.create(resources.NODES, builders.node("clean", taints=[]))
    await api.create(resources.PODS, builders.pod("plain", node="tainted"))
    await api.create(resources.PODS, builders.pod("plain-elsewhere", node="clean"))
    await api.create(
        resources.PODS,
        builders.pod(
            "minute",
            node="tainted",
            tolerations=[{"key": "maintenance", "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": 60}],
        ),
    )
    await api.create(
        resources.PODS,
        builders.pod("forever", node="tainted", tolerations=[{"key": "maintenance", "operator": "Exists"}]),
    )
    manager = taint_manager.TaintManager(api, clock=manual, reader=stand_in_reader)
    assert await manager.sync() == ["default/plain"]
    await manual.run_for(59)
    assert await manager.sync() == []
    await manual.run_for(1)
    assert await manager.sync() == ["default/minute"]
    await manual.run_for(3600)
    assert await manager.sync() == []
    left, _ = await api.list(resources.PODS)
    assert sorted(p["metadata"]["name"] for p in left) == ["forever", "plain-elsewhere"]
    events, _ = await api.list(resources.EVENTS)
    assert sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "TaintManagerEviction") == [
        "minute",
        "plain",
    ]


async def test_a_taint_removed_in_time_cancels_the_eviction(
    api: rest.RestClient, stand_in_reader: reads.Reader | None
) -> None:
    manual = clock.ManualClock(1_700_000_000.0)
    await api.create(resources.NODES, builders.node("tainted", taints=[TAINT]))
    await api.create(
        resources.PODS,
        builders.pod("minute", node="tainted", tolerations=[{"operator": "Exists", "tolerationSeconds": 60}]),
    )
    manager = taint_manager.TaintManager(api, clock=manual, reader=stand_in_reader)
    assert await manager.sync() == []
    await manual.run_for(30)
    await api.patch(resources.NODES, "tainted", {"spec": {"taints": None}})
    assert await manager.sync() == []
    await api.patch(resources.NODES, "tainted", {"spec": {"taints": [TAINT]}})
    assert await manager.sync() == []  # timed again from the pass that saw the taint come back
    await manual.run_for(45)
    assert await manager.sync() == []
    await manual.run_for(15)
    assert await manager.sync() == ["default/minute"]
