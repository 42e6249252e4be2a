"""`RemoteCluster`: an EmulatedCluster served by a child process, reachable over HTTP, gone when the block ends."""

from __future__ import annotations

import gc
import os

import boto3
import pytest

from karpy import tasks
from karpy.kube import resources
from karpy_emulator import cluster, remote


@pytest.mark.slow
async def test_the_child_serves_kubernetes_and_aws_and_stops_with_the_block() -> None:
    options = cluster.ClusterOptions(cluster_name="karpy-remote", boot_delay=0.0, interval=0.5)
    before = os.environ.get("AWS_ENDPOINT_URL")
    async with remote.RemoteCluster(options) as emulated:
        pid = emulated.endpoints.pid
        assert pid != os.getpid()
        nodes, _ = await emulated.client.list(resources.NODES)
        assert nodes == []
        assert os.environ["AWS_ENDPOINT_URL"] == emulated.endpoints.aws_endpoint_url
        ec2 = boto3.client("ec2", region_name=emulated.region)
        subnets = ec2.describe_subnets(
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [emulated.cluster_name]}]
        )["Subnets"]
        assert len(subnets) == options.zones  # seeded by the child: one subnet per zone
    assert os.environ.get("AWS_ENDPOINT_URL") == before
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_virtual_clock_cannot_cross_processes() -> None:
    with pytest.raises(ValueError, match="virtual_time"):
        remote.RemoteCluster(cluster.ClusterOptions(virtual_time=True))


def test_the_child_serves_with_the_controllers_collector_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []

    async def serve(options: cluster.ClusterOptions) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr(remote, "serve", serve)
    before = gc.get_threshold()
    assert before != tasks.COLLECTOR_THRESHOLDS  # else the test proves nothing
    assert remote.main([]) == 0
    assert seen == [tasks.COLLECTOR_THRESHOLDS]
    assert gc.get_threshold() == before
