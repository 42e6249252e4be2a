"""DRY_RUN end to end through the wiring: the reconcilers run and log their decisions, and nothing is changed, in
the cluster (a DryRunClient) or in the cloud (a DryRunCloud: no launch, no termination, no queue deletion)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests import builders

from karpy import clock, settings
from karpy.api import parse
from karpy.cloudprovider import dryrun as cloudprovider_dryrun
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, dryrun, resources, rest
from karpy.nodeclaim import garbagecollection
from karpy.state import cluster as state_cluster
from karpy.wiring import graph


class _Queue:
    def __init__(self) -> None:
        self.deleted: list[interruption.Received] = []

    async def receive(self, *, wait_seconds: int = 20) -> list[interruption.Received]:
        return []

    async def delete(self, received: interruption.Received) -> None:
        self.deleted.append(received)


class _NodeClasses:
    def __init__(self) -> None:
        self.finalized: list[str] = []

    async def reconcile_nodeclass(self, nc: Any) -> Any:
        return nc.status

    async def finalize_nodeclass(self, nc: Any) -> None:
        self.finalized.append(nc.name)


def _build(api: rest.RestClient, cloud: fake_provider.FakeCloudProvider, *, dry_run: bool, **parts: Any) -> Any:
    env = {"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true", "DRY_RUN": str(dry_run).lower()}

    def factory(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(provider=cloud, **parts)

    return graph.build(
        settings.Settings.from_env(env), kube=api, clock=clock.ManualClock(), cloud_factory=factory, identity="x"
    )


async def _leaked_instance(cloud: fake_provider.FakeCloudProvider) -> str:
    """An instance the cloud runs with no NodeClaim in the cluster (as one of upstream Karpenter's would look)."""
    launched = await cloud.create(parse.nodeclaim(builders.nodeclaim("elsewhere")))
    cloud.create_calls.clear()
    return launched.status.provider_id


@pytest.mark.parametrize("dry_run", [True, False])
async def test_garbage_collection_terminates_a_leaked_instance_only_for_real(
    api: rest.RestClient, dry_run: bool, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = fake_provider.FakeCloudProvider()
    provider_id = await _leaked_instance(cloud)
    ctrl = _build(api, cloud, dry_run=dry_run)
    assert isinstance(ctrl.kube, dryrun.DryRunClient) is dry_run
    assert isinstance(ctrl.cloud.provider, cloudprovider_dryrun.DryRunCloud) is dry_run
    await ctrl.nodeclaims.collect_garbage()  # first sighting
    ctrl.clock.advance(garbagecollection.INSTANCE_GRACE + 1)
    with caplog.at_level(logging.INFO):
        await ctrl.nodeclaims.collect_garbage()
    if dry_run:
        assert cloud.delete_calls == []
        assert provider_id in cloud.instances
        assert "dry run: would terminate the instance" in caplog.messages
    else:
        assert [c.status.provider_id for c in cloud.delete_calls] == [provider_id]


@pytest.mark.parametrize("dry_run", [True, False])
async def test_a_dry_run_launches_nothing_for_a_nodeclaim_it_finds(api: rest.RestClient, dry_run: bool) -> None:
    cloud = fake_provider.FakeCloudProvider()
    created = await api.create(resources.NODECLAIMS, builders.nodeclaim("theirs"))
    ctrl = _build(api, cloud, dry_run=dry_run)
    ctrl.cluster.apply(resources.NODECLAIMS, client.WatchEvent(client.ADDED, created))  # as its informer would
    await ctrl.nodeclaims.reconcile("theirs")
    stored = await api.get(resources.NODECLAIMS, "theirs")
    assert stored is not None
    if dry_run:
        assert cloud.create_calls == []
        assert "status" not in stored  # and nothing was written on it
    else:
        assert [c.name for c in cloud.create_calls] == ["theirs"]
        assert stored["status"]["providerID"]


async def test_dry_run_cloud_parts_log_instead_of_deleting_messages_or_cleaning_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue, nodeclasses = _Queue(), _NodeClasses()
    parts = cloudprovider_dryrun.wrap(
        cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), nodeclasses=nodeclasses, queue=queue)
    )
    assert isinstance(parts.queue, cloudprovider_dryrun.DryRunQueue)
    assert parts.nodeclasses is not None
    notice = interruption.Received(
        interruption.Message(interruption.Kind.SPOT_INTERRUPTION, ("i-1",)),
        receipt_handle="r",
    )
    nc = parse.ec2nodeclass(builders.ec2nodeclass("gone"))
    with caplog.at_level(logging.INFO):
        await parts.queue.delete(notice)
        await parts.nodeclasses.finalize_nodeclass(nc)
    assert queue.deleted == []
    assert nodeclasses.finalized == []
    assert "dry run: would delete the interruption message" in caplog.messages
    assert "dry run: would delete the launch templates and instance profile of a deleted EC2NodeClass" in (
        caplog.messages
    )
