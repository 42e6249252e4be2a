"""Losing the Lease ends `app.run` with LeadershipLost (after an orderly stop), and `karpy run` exits 1 so the
Deployment restarts it as a follower — upstream's behaviour. Emulated API server, fake provider, wall clock."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from tests import polling

from karpy import clock, settings, tasks
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import credentials, resources, rest
from karpy.operator import app, login, main
from karpy.operator import logging as operator_logging
from karpy.runtime import leadership
from karpy.runtime import lease as runtime_lease
from karpy.state import cluster as state_cluster
from karpy.wiring import graph
from karpy_emulator.apiserver import runner

LEASE = "karpy-leader-election"
FAST = 0.1
"""Seconds between election rounds here (upstream: renew every 5 s, retry every 2 s)."""


def fake_cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
    return cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider())


async def test_a_deposed_leader_stops_its_loops_and_run_raises(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    s = settings.Settings.from_env({"CLUSTER_NAME": "test"})
    cfg = credentials.Credentials(kube.url)
    wall = clock.SystemClock()
    async with rest.RestClient(cfg, clock=wall) as kube_client:
        ctrl = graph.build(s, kube=kube_client, clock=wall, cloud_factory=fake_cloud, identity="me", namespace="karpy")
        ctrl.elector = runtime_lease.LeaderElector(
            kube_client, name=LEASE, namespace="karpy", clock=wall, identity="me", renew_period=FAST, retry_period=FAST
        )
        stop = asyncio.Event()
        task = asyncio.create_task(
            app.run(ctrl, stop=stop, endpoints=app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0))
        )
        try:
            await ctrl.elector.elected.wait()
            leader_tasks = await _leader_loops(names=set(leadership.singletons(ctrl)))
            # Another replica takes the Lease over (as after a long pause of ours: our renewals stopped landing).
            lease = await api.get(resources.LEASES, LEASE, namespace="karpy")
            assert lease is not None
            taken: dict[str, Any] = {"spec": {"holderIdentity": "other_replica", "leaseTransitions": 1}}
            await api.patch(resources.LEASES, LEASE, taken, namespace="karpy")
            with pytest.raises(leadership.LeadershipLost, match="me lost the leader Lease"):
                await task
        finally:
            stop.set()
            if not task.done():
                await task
    assert all(t.done() for t in leader_tasks)  # every leader loop ended with it
    assert not ctrl.elector.is_leader()
    assert ctrl.metrics.leader._value.get() == 0
    lease = await api.get(resources.LEASES, LEASE, namespace="karpy")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "other_replica"  # the deposed replica did not write it back


async def _leader_loops(*, names: set[str]) -> list[asyncio.Task[Any]]:
    """The running tasks of the leader's singleton loops, once all started."""

    def started() -> list[asyncio.Task[Any]]:
        tasks = [t for t in asyncio.all_tasks() if t.get_name() in names]
        return tasks if len(tasks) == len(names) else []

    return await polling.until(started)


def test_karpy_run_exits_1_when_leadership_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    async def deposed(*_: Any, **__: Any) -> None:
        raise leadership.LeadershipLost("karpy-0 lost the leader Lease")

    # Only the exit-code mapping is under test: no real server, and no rewiring of the test run's root logger.
    monkeypatch.setattr(main, "serve", deposed)
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))
    assert main.main({"CLUSTER_NAME": "test", "AWS_REGION": "us-west-2"}) == main.EXIT_LEADERSHIP_LOST == 1


def test_karpy_run_serves_under_the_controllers_collector_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """`karpy run` sets `tasks.COLLECTOR_THRESHOLDS` for its whole run (fewer full collections of its long-lived
    objects) and leaves them as it found them."""
    seen: list[tuple[int, ...]] = []

    async def serving(*_: Any, **__: Any) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr(main, "serve", serving)
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))
    was = gc.get_threshold()
    assert main.main({"CLUSTER_NAME": "test", "AWS_REGION": "us-west-2"}) == main.EXIT_OK
    assert seen == [tasks.COLLECTOR_THRESHOLDS]
    assert gc.get_threshold() == was
