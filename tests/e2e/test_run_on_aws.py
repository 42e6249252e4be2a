"""`karpy run`'s object graph with the real AWS provider (`graph.aws_cloud` → `cloudprovider.aws.factory`) against
moto server and the emulated API server with its kubelet and kube-scheduler stand-ins (`karpy_emulator.cluster`):

EC2NodeClass → Ready with the seeded subnets / security groups / AMIs and an instance profile; pending pod →
NodeClaim → a real moto instance → the kubelet stand-in registers its Node → Registered / Initialized → the
scheduler stand-in binds the pod. Wall clock, every wait bounded; the app stops through its stop flag and leaves no
thread behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import boto3
import pytest
from tests import builders, polling
from tests.operator import support

from karpy import clock, settings
from karpy.api import labels
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import provider as aws_provider
from karpy.kube import credentials, resources, rest
from karpy.operator import app
from karpy.runtime import leadership
from karpy.runtime import parts as runtime_parts
from karpy.state import cluster as state_cluster
from karpy.wiring import graph
from karpy_emulator import cluster
from karpy_emulator.aws import seeding

CLUSTER = "operator-aws"
QUEUE_WAIT = 1
"""SQS long-poll seconds in the test: a 20 s poll in flight would keep a boto3 thread alive past the stop."""


class ShortPollQueue:
    """The factory's SQS queue with a short long-poll (see QUEUE_WAIT)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def receive(self, *, wait_seconds: int = QUEUE_WAIT) -> list[interruption.Received | interruption.Unreadable]:
        received: list[interruption.Received | interruption.Unreadable] = await self.inner.receive(
            wait_seconds=min(wait_seconds, QUEUE_WAIT)
        )
        return received

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        await self.inner.delete(received)


def real_aws(
    emulated: cluster.EmulatedCluster, built: list[cloudprovider_parts.CloudParts]
) -> runtime_parts.CloudFactory:
    """`graph.aws_cloud` as `karpy run` uses it, plus two test-only speed-ups on what it built: the emulator's
    in-process catalog answers (moto serialises ~1,400 shapes over HTTP in ~20 s) and a short SQS poll."""
    production = graph.aws_cloud(dict(emulated.aws_env))

    def build(s: settings.Settings, state: state_cluster.Cluster, c: clock.Clock) -> cloudprovider_parts.CloudParts:
        parts = production(s, state, c)
        assert isinstance(parts.provider, aws_provider.AWSCloudProvider)
        seeding.install_fast_catalog(parts.provider._deps.aws.ec2, region=emulated.region)
        assert parts.queue is not None  # INTERRUPTION_QUEUE was set
        assert parts.instance_status is not None  # DescribeInstanceStatus needs no queue: always a source
        parts = dataclasses.replace(parts, queue=ShortPollQueue(parts.queue))
        built.append(parts)
        return parts

    return build


@pytest.fixture
async def emulated() -> AsyncIterator[cluster.EmulatedCluster]:
    """The emulated cluster; no thread started while it ran (moto's, the app's, boto3's) outlives it."""
    threads_before = {t.ident for t in threading.enumerate()}
    options = cluster.ClusterOptions(cluster_name=CLUSTER, boot_delay=0.5, interval=0.2, zones=2)
    async with cluster.EmulatedCluster(options) as running:
        yield running
    # asyncio_N threads are the event loop's default executor (asyncio.to_thread); the loop shuts them down.
    started = [t for t in threading.enumerate() if t.ident not in threads_before and not t.name.startswith("asyncio_")]
    for thread in started:  # e.g. moto still answering the last SQS poll (at most QUEUE_WAIT s)
        await asyncio.to_thread(thread.join, QUEUE_WAIT + 2)
    assert [t for t in started if t.is_alive()] == []


NODEPOOL = builders.nodepool(
    requirements=[
        {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels.LABEL_ARCH, "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
    ],
    limits={"cpu": "100"},
)
POD = builders.pod("web-1", memory="1Gi", terminationGracePeriodSeconds=0)
SELECTOR = [{"tags": {seeding.DISCOVERY_TAG: CLUSTER}}]


def described_instances(region: str) -> list[Mapping[str, Any]]:
    ec2 = boto3.client("ec2", region_name=region)
    reservations = ec2.describe_instances()["Reservations"]
    return [i for r in reservations for i in r["Instances"] if i["State"]["Name"] != "terminated"]


async def test_the_aws_provider_takes_a_pending_pod_to_a_bound_pod(emulated: cluster.EmulatedCluster) -> None:
    seeded = emulated.seeded
    assert seeded is not None
    s = settings.Settings.from_env(
        {
            "CLUSTER_NAME": CLUSTER,
            "INTERRUPTION_QUEUE": emulated.queue_name,
            "ISOLATED_VPC": "true",  # moto's Pricing API has no price list; the bundled table prices offerings
            "BATCH_IDLE_DURATION": "100ms",
            "CREATE_FLEET_BATCH_IDLE_DURATION": "50ms",
            "DISABLE_LEADER_ELECTION": "true",
        }
    )
    built: list[cloudprovider_parts.CloudParts] = []
    api = emulated.client
    cfg = credentials.Credentials(emulated.api_url)
    stop = asyncio.Event()
    ports: dict[str, int] = {}

    def on_bound(metrics_port: int, health_port: int) -> None:
        ports.update(metrics=metrics_port, health=health_port)

    async with rest.RestClient(cfg, clock=clock.SystemClock()) as kube:
        ctrl = graph.build(
            s,
            kube=kube,
            clock=clock.SystemClock(),
            cloud_factory=real_aws(emulated, built),
            identity="karpy-0_aws",
            namespace="karpy",
        )
        task = asyncio.create_task(
            app.run(
                ctrl,
                stop=stop,
                endpoints=app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0),
                on_bound=on_bound,
            )
        )
        try:
            assert ctrl.interruption is not None  # the factory's SQS queue is wired to the interruption controller
            assert ctrl.instance_status is not None  # and its instance-status poller to a second such loop
            assert "instance status" in leadership.singletons(ctrl)  # run by the leader only, with the other loops
            assert "launch template janitor" in leadership.singletons(ctrl)  # as is the launch-template sweep
            assert "instance tagger" in leadership.singletons(ctrl)  # and the tagging of registered instances
            await api.create(
                resources.EC2NODECLASSES,
                builders.ec2nodeclass(
                    role=seeded.node_role, subnetSelectorTerms=SELECTOR, securityGroupSelectorTerms=SELECTOR
                ),
            )
            await api.create(resources.NODEPOOLS, NODEPOOL)

            async def nodeclass_ready() -> Mapping[str, Any] | None:
                """the EC2NodeClass is Ready with what AWS resolved"""
                nc = await api.get(resources.EC2NODECLASSES, "default")
                return nc if support.condition(nc, "Ready").get("status") == "True" else None

            nc = await polling.until(nodeclass_ready)
            found = nc["status"]
            assert {s["id"] for s in found["subnets"]} == set(seeded.subnet_ids)
            assert {g["id"] for g in found["securityGroups"]} == set(seeded.security_group_ids)
            assert {a["id"] for a in found["amis"]} <= set(seeded.images.values())
            assert found["amis"]
            assert found["instanceProfile"]
            assert labels.FINALIZER_AWS_TERMINATION in nc["metadata"]["finalizers"]

            await api.create(resources.PODS, POD)  # the scheduler stand-in marks it Unschedulable

            async def bound() -> Mapping[str, Any] | None:
                """the pod is bound to a node"""
                pod = await api.get(resources.PODS, "web-1", namespace="default")
                return pod if (pod or {}).get("spec", {}).get("nodeName") else None

            pod = await polling.until(bound)

            async def initialized() -> Mapping[str, Any] | None:
                """the NodeClaim is Initialized (its Node Ready, the unregistered taint gone)"""
                claims, _ = await api.list(resources.NODECLAIMS)
                assert len(claims) == 1  # one pod, one node: no duplicate launch while the first was in flight
                return claims[0] if support.condition(claims[0], "Initialized").get("status") == "True" else None

            claim = await polling.until(initialized)
            for condition in ("Launched", "Registered"):
                assert support.condition(claim, condition).get("status") == "True", condition
            node = await api.get(resources.NODES, pod["spec"]["nodeName"])
            assert node is not None
            assert node["spec"]["providerID"] == claim["status"]["providerID"]
            assert claim["status"]["nodeName"] == node["metadata"]["name"]
            node_labels = node["metadata"]["labels"]
            assert node_labels[labels.LABEL_NODEPOOL] == "default"
            assert node_labels[labels.LABEL_INITIALIZED] == "true"
            # the start-up check read the emulated kube-dns Service (the default service CIDR's tenth address)
            (cloud,) = built
            assert isinstance(cloud.provider, aws_provider.AWSCloudProvider)
            assert (await cloud.provider.resolver.cluster()).kube_dns_ip == "172.20.0.10"
            assert node_labels[labels.LABEL_INSTANCE_TYPE].startswith("m")
            assert not [t for t in node["spec"].get("taints") or () if t["key"] == labels.TAINT_UNREGISTERED_KEY]
            # a real moto instance backs it, launched from the resolved AMI into a seeded subnet, tagged as upstream
            (instance,) = await asyncio.to_thread(described_instances, emulated.region)
            assert claim["status"]["providerID"].endswith(instance["InstanceId"])
            assert instance["SubnetId"] in seeded.subnet_ids
            assert instance["ImageId"] == claim["status"]["imageID"]
            tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
            assert tags[labels.TAG_NODEPOOL] == "default"
            assert tags[f"{labels.TAG_CLUSTER_PREFIX}{CLUSTER}"] == "owned"
            assert tags[labels.TAG_NODECLAIM] == claim["metadata"]["name"]  # from the launch: what adoption looks up

            async def tagged() -> dict[str, str] | None:
                """registered: the tagger names the instance after its node"""
                (described,) = await asyncio.to_thread(described_instances, emulated.region)
                found = {t["Key"]: t["Value"] for t in described["Tags"]}
                return found if labels.TAG_NAME in found else None

            tags = await polling.until(tagged)
            assert tags[labels.TAG_NODECLAIM] == claim["metadata"]["name"]
            assert tags[labels.TAG_NAME] == node["metadata"]["name"]
            (parts,) = built
            assert id(parts.nodeclasses) == id(parts.provider)  # one AWS provider serves the NodeClass controller too
            assert isinstance(parts.provider, aws_provider.AWSCloudProvider)
            windows = parts.provider._deps.settings.batch_windows  # the settings reach the batchers
            assert (windows.create_fleet.idle, windows.create_fleet.max_items) == (0.05, 1000)

            async with aiohttp.ClientSession() as http:

                async def scraped() -> str:
                    """/metrics counts the registered node (the informer saw Registered turn True)"""
                    async with http.get(f"http://127.0.0.1:{ports['metrics']}/metrics") as response:
                        text = await response.text()
                    created = re.search(
                        r'karpenter_nodes_created_total\{nodepool="default",zone="[a-z0-9-]+"\} 1\.0', text
                    )
                    return text if created else ""  # labelled with the zone it launched in, as upstream

                text = await polling.until(scraped)
            labelled = 'min_values_relaxed="false",nodepool="default",reason="provisioning"'
            assert f"karpenter_nodeclaims_created_total{{{labelled}}} 1.0" in text
            # every AWS call of the factory's clients is counted (the node class's authorization dry runs are
            # CreateFleet calls too), and the one launch is one merged CreateFleet of one instance
            assert 'karpy_cloudprovider_api_calls_total{operation="CreateFleet",service="ec2"}' in text
            assert 'karpenter_cloudprovider_batcher_batch_size_count{batcher="create_fleet"} 1.0' in text
            assert 'karpenter_cloudprovider_batcher_batch_size_sum{batcher="create_fleet"} 1.0' in text
        finally:
            stop.set()
            await task
    assert task.exception() is None
