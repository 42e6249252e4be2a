"""aws.moto_instances.MotoInstances: the kubelet's in-process read of moto's EC2 backend describes the cluster's
instances exactly as DescribeInstances over HTTP does (`seeding.InstanceReader`), through every state."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import boto3
import pytest
from tests.emulator import test_cluster_emulated

from karpy_emulator import cluster
from karpy_emulator.aws import moto_instances, seeding


async def test_the_backend_read_matches_describe_instances() -> None:
    options = cluster.ClusterOptions(cluster_name=test_cluster_emulated.CLUSTER, virtual_time=True)
    async with cluster.EmulatedCluster(options) as emulated:
        assert emulated.seeded is not None
        subnets = emulated.seeded.subnet_ids
        launched = [
            await asyncio.to_thread(test_cluster_emulated._launch, emulated.region, subnet) for subnet in subnets[:3]
        ]
        ec2 = boto3.client("ec2", region_name=emulated.region)
        ec2.run_instances(ImageId=ec2.describe_images(Owners=["self"])["Images"][0]["ImageId"], MinCount=1, MaxCount=1)
        ec2.terminate_instances(InstanceIds=launched[:1])  # shutting-down / terminated instances are listed too
        ec2.stop_instances(InstanceIds=launched[1:2])
        over_http = seeding.InstanceReader(region=emulated.region, endpoint_url=emulated.aws_endpoint_url)
        in_process = moto_instances.MotoInstances(region=emulated.region, endpoint_url=emulated.aws_endpoint_url)
        name = test_cluster_emulated.CLUSTER
        described = await asyncio.to_thread(over_http.cluster_instances, name)
        assert sorted(v.id for v in described) == sorted(launched)  # the untagged instance is not the cluster's
        assert await asyncio.to_thread(in_process.cluster_instances, name) == described
        assert {v.state for v in described} >= {"running"}
        assert len({v.state for v in described}) == 3
        user_data = await asyncio.to_thread(in_process.user_data, launched[2])
        assert user_data == await asyncio.to_thread(over_http.user_data, launched[2])
        assert user_data


def test_threads_reading_at_once_share_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet stand-in reads user data from several worker threads at once: they must share one session and
    client, not each parse EC2's service model into one of their own."""
    sessions: list[object] = []
    real_session = seeding._session

    def counted(region: str) -> object:
        sessions.append(region)
        return real_session(region)

    monkeypatch.setattr(seeding, "_session", counted)
    reader = seeding.InstanceReader(region="us-east-1", endpoint_url="http://127.0.0.1:9")
    lined_up = threading.Barrier(8)

    def first_use() -> object:
        lined_up.wait()  # all eight ask before any client exists
        return reader._ec2()

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        clients = list(pool.map(lambda _: first_use(), range(8)))
    assert sessions == ["us-east-1"]
    assert all(client is clients[0] for client in clients)
