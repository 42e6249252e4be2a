"""The kube-dns address discovered at start and given to the cloud side, as upstream's operator does (aws:
pkg/operator/operator.go KubeDNSIP): read from the emulated API server by the start-up check `graph.build` wires
(`karpy.wiring.startup`), before the cloud side's own check; when it cannot be read, one warning line and start-up
goes on."""

from __future__ import annotations

import logging

import pytest

from karpy import clock, settings
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import resources, rest
from karpy.runtime import parts
from karpy.state import cluster as state_cluster
from karpy.wiring import graph, startup

KUBE_DNS = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "kube-dns", "namespace": "kube-system"},
    "spec": {"clusterIP": "10.123.0.53", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
}


class Cloud:
    """A cloud side that takes the address and has a start-up check of its own; records the order of both."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def use_kube_dns(self, address: str) -> None:
        self.seen.append(f"kube-dns {address}")

    async def check(self) -> None:
        self.seen.append("check")

    def parts(self) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(
            provider=fake_provider.FakeCloudProvider(), use_kube_dns=self.use_kube_dns, check=self.check
        )


def _controller(api: rest.RestClient, cloud: cloudprovider_parts.CloudParts, **env: str) -> parts.Controller:
    def factory(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloud

    s = settings.Settings.from_env({"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true", **env})
    return graph.build(s, kube=api, clock=clock.ManualClock(), cloud_factory=factory, identity="x")


def _karpys(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What karpy logged: not the emulated API server's access log, which an earlier test of the same process may have
    turned up to INFO (caplog's handler sits on the root logger)."""
    return [r for r in caplog.records if r.name == "karpy" or r.name.startswith("karpy.")]


@pytest.mark.parametrize("dry_run", ["false", "true"])
async def test_the_start_up_check_tells_the_cloud_the_address_then_runs_its_own(
    api: rest.RestClient, dry_run: str, caplog: pytest.LogCaptureFixture
) -> None:
    await api.create(resources.SERVICES, KUBE_DNS)
    cloud = Cloud()
    ctrl = _controller(api, cloud.parts(), DRY_RUN=dry_run)
    assert ctrl.cloud.check is not None
    with caplog.at_level(logging.INFO, logger=startup.__name__):
        await ctrl.cloud.check()
    assert cloud.seen == ["kube-dns 10.123.0.53", "check"]
    assert [r.getMessage() for r in _karpys(caplog)] == [
        "kube-dns discovered at 10.123.0.53: nodes get it as their cluster DNS unless their EC2NodeClass names one"
    ]


async def test_without_the_service_one_warning_and_start_up_goes_on(
    api: rest.RestClient, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = Cloud()
    ctrl = _controller(api, cloud.parts())
    assert ctrl.cloud.check is not None
    with caplog.at_level(logging.INFO, logger=startup.__name__):
        await ctrl.cloud.check()
    assert cloud.seen == ["check"]
    (record,) = _karpys(caplog)
    assert (record.levelno, record.exc_info) == (logging.WARNING, None)
    assert record.getMessage() == (
        "kube-dns not discovered (Service kube-system/kube-dns does not exist): nodes get the cluster DNS their "
        "bootstrap defaults to, unless their EC2NodeClass sets spec.kubelet.clusterDNS"
    )


async def test_a_cloud_that_takes_no_address_reads_nothing(api: rest.RestClient) -> None:
    cloud = cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider())
    assert startup.with_kube_dns(cloud, api) is cloud
    assert _controller(api, cloud).cloud.check is None
