"""The disruption loop keeps serving through failed passes: logged, backed off on the virtual clock, retried."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import pytest
from tests import logtext, tasks
from tests.disruption import world as disruption_world

from karpy import clock as karpy_clock
from karpy.api import labels, nodepool
from karpy.cloudprovider import errors, types
from karpy.cloudprovider.fake import provider
from karpy.disruption import consolidation, methods
from karpy.disruption import controller as disruption_controller
from karpy.kube import client, resources


class FlakyCloud(provider.FakeCloudProvider):
    """`instance_types` fails on the calls `fails` picks (counted from 0) and remembers when each call came."""

    def __init__(self, clock: karpy_clock.ManualClock, fails: Callable[[int], bool]) -> None:
        super().__init__(list(disruption_world.CATALOG))
        self._clock, self._fails = clock, fails
        self.calls: list[float] = []

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        self.calls.append(self._clock.now())
        if self._fails(len(self.calls) - 1):
            raise errors.CloudProviderError("pricing API unavailable")
        return await super().instance_types(pool)


class FlakyMethod:
    """A disruption method that raises (a bug) on the calls `fails` picks (counted from 0): the pass fails."""

    name = "flaky"
    reason = nodepool.DisruptionReason.EMPTY

    def __init__(self, clock: karpy_clock.ManualClock, fails: Callable[[int], bool]) -> None:
        self._clock, self._fails = clock, fails
        self.calls: list[float] = []

    def compute(self, ctx: methods.Context) -> consolidation.Command | None:
        self.calls.append(self._clock.now())
        if self._fails(len(self.calls) - 1):
            raise RuntimeError("a bug")
        return None


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == disruption_controller.__name__ and r.levelno == logging.ERROR]


async def test_a_cloud_provider_error_leaves_that_pools_nodes_and_the_next_pass_acts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As upstream's BuildNodePoolMap: a pool whose instance types cannot be listed has its nodes left out of the
    pass (logged), the pass itself goes on, and the next pass handles them."""
    w = disruption_world.World()
    w.pool()
    w.node("n0")  # empty: Emptiness deletes it once its pool's instance types are known
    w.cloud = FlakyCloud(w.clock, lambda call: call == 0)
    ctrl = w.controller()
    w.sync()
    async with tasks.running(ctrl.run) as task:
        await w.clock.run_for(0.5)
        (failure,) = _failures(caplog)
        assert logtext.plain(failure) == "failed listing instance types: CloudProviderError: pricing API unavailable"
        assert (failure.nodepool, failure.error) == ("default", "pricing API unavailable")
        assert not w.deleting("n0")
        await w.clock.run_for(30)  # the 10 s poll, then a pass: 15 s validation, then the queue deletes
        assert w.deleting("n0")
        assert not task.done()


async def test_a_refused_replacement_is_logged_and_the_command_is_decided_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = disruption_world.World()
    w.pool()
    w.node("big", itype="c8")
    w.pod("p", "big", cpu="1")
    w.kube.next_create_error = client.KubeError(500, "InternalError", "etcdserver: request timed out")
    ctrl = w.controller()
    w.sync()
    async with tasks.running(ctrl.run) as task:
        await w.clock.run_for(16)  # validation, then the create fails and the command is undone
        (failure,) = _failures(caplog)
        assert failure.exc_info is not None
        assert isinstance(failure.exc_info[1], client.KubeError)
        assert labels.TAINT_DISRUPTED_KEY not in w.taints("big")
        await w.clock.run_for(20)
        assert not task.done()
    replacements = [o for o in w.kube.all(resources.NODECLAIMS) if o["metadata"]["name"] != "big"]
    assert len(replacements) == 1
    assert labels.TAINT_DISRUPTED_KEY in w.taints("big")


@pytest.mark.parametrize(
    ("failing_calls", "offsets"),
    [
        # 1 s, 2 s, 4 s after consecutive failures; a success resets it (then the 10 s poll, and 1 s again)
        ({0, 1, 2, 4}, [0, 1, 3, 7, 17, 18]),
        # doubling stops at a minute
        (None, [0, 1, 3, 7, 15, 31, 63, 123, 183]),
    ],
)
async def test_failed_passes_back_off_exponentially_to_a_minute(
    failing_calls: set[int] | None, offsets: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    w = disruption_world.World()
    w.pool()  # no nodes: every pass that gets through finds nothing and polls again in 10 s
    start = w.clock.now()
    ctrl = w.controller()
    flaky = FlakyMethod(w.clock, lambda call: failing_calls is None or call in failing_calls)
    ctrl.methods.insert(0, flaky)
    w.sync()
    async with tasks.running(ctrl.run):
        await w.clock.run_for(offsets[-1] + 0.5)
    assert [t - start for t in flaky.calls] == offsets


async def test_an_unsynced_cluster_is_looked_at_again_after_a_second_not_the_polling_period() -> None:
    """upstream disruption/controller.go `Reconcile`: while `cluster.Synced` is false (a NodeClaim, e.g. the
    replacement the last command created, has no providerID yet) it requeues after one second; only a pass that
    found nothing to do waits the 10 s pollingPeriod. A 10 s wait after every replace command slowed a long
    consolidation (bench/performance.py wideDeployments)."""
    w = disruption_world.World()
    w.pool()
    w.node("launching")
    launched = w.kube.obj(resources.NODECLAIMS, "launching")
    assert launched is not None
    unlaunched = {**launched, "status": {k: v for k, v in launched["status"].items() if k != "providerID"}}
    w.kube.put(resources.NODECLAIMS, unlaunched)
    start = w.clock.now()
    ctrl = w.controller()
    recorder = FlakyMethod(w.clock, lambda _call: False)
    ctrl.methods[:] = [recorder]  # finds nothing: the passes' pace is the loop's alone
    w.sync()
    async with tasks.running(ctrl.run):
        await w.clock.run_for(2.5)
        assert recorder.calls == []  # not synced: no pass yet
        w.kube.put(resources.NODECLAIMS, launched)
        w.sync()
        await w.clock.run_for(11)
    # the first pass a second-tick after the launch resolved, then the polling period
    assert [t - start for t in recorder.calls] == [3, 13]
