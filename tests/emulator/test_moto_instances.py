"""aws.moto_instances.MotoInstances: the kubelet's in-process read of moto's EC2 backend describes the cluster's
instances exactly as DescribeInstances over HTTP does (`seeding.InstanceReader`), through every state."""

from __future__ import annotations

import asyncio

import boto3
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
