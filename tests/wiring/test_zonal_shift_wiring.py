"""Operator wiring of ARC zonal shift (ENABLE_ZONAL_SHIFT): a cloud side that follows shifts gets the NodePool events
loop among the leader's loops (in a dry run too: it only reads and records), and a failed start-up check of the
cloud side stops `karpy run` with exit code 2 and its message before anything is served."""

from __future__ import annotations

import asyncio

import pytest

from karpy import clock, settings
from karpy.cloudprovider import errors
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import credentials, rest
from karpy.operator import app, login, main
from karpy.operator import logging as operator_logging
from karpy.runtime import leadership, parts
from karpy.state import cluster as state_cluster
from karpy.wiring import graph


class Shifts:
    async def update(self) -> None:
        pass

    def shifted_zones(self) -> frozenset[str]:
        return frozenset()


async def _not_registered() -> None:
    raise errors.StartupCheckFailed("ENABLE_ZONAL_SHIFT=true: cluster arn:x is not registered with ARC zonal shift")


def _factory(cloud: cloudprovider_parts.CloudParts) -> parts.CloudFactory:
    def build(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloud

    return build


def _controller(cloud: cloudprovider_parts.CloudParts, **env: str) -> parts.Controller:
    s = settings.Settings.from_env({"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true", **env})
    inner = rest.RestClient(credentials.Credentials("http://127.0.0.1:1"), clock=clock.SystemClock())
    return graph.build(s, kube=inner, clock=clock.ManualClock(), cloud_factory=_factory(cloud), identity="x")


@pytest.mark.parametrize("dry_run", ["false", "true"])
def test_a_cloud_that_follows_shifts_runs_the_events_loop_as_the_leader(dry_run: str) -> None:
    shifts = Shifts()
    ctrl = _controller(
        cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), zonal_shifts=shifts), DRY_RUN=dry_run
    )
    assert ctrl.zonal_shift is not None
    assert ctrl.zonal_shift._source is shifts
    assert "zonal shift" in leadership.singletons(ctrl)
    bare = _controller(cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider()), DRY_RUN=dry_run)
    assert bare.zonal_shift is None
    assert "zonal shift" not in leadership.singletons(bare)


async def test_a_failed_start_up_check_stops_the_run_before_anything_is_served() -> None:
    ctrl = _controller(
        cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), check=_not_registered)
    )
    bound: list[int] = []
    with pytest.raises(errors.StartupCheckFailed, match="not registered"):
        await app.run(
            ctrl,
            stop=asyncio.Event(),
            endpoints=app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0),
            on_bound=lambda metrics, _: bound.append(metrics),
        )
    assert bound == []


def test_karpy_run_exits_2_with_the_checks_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cloud = cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), check=_not_registered)
    monkeypatch.setattr(graph, "aws_cloud", lambda _: _factory(cloud))
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))
    environ = {"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true", "ENABLE_ZONAL_SHIFT": "true"}
    assert main.main(environ) == main.EXIT_INVALID
    assert "karpy run: ENABLE_ZONAL_SHIFT=true: cluster arn:x is not registered" in capsys.readouterr().err
