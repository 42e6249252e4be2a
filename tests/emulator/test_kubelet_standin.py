"""The kubelet stand-in against moto + the emulated API server, with an instance launched by the real AWS provider.

launch (provider.create with a NodeClaim) → Node registered with the launch's labels and taints, NotReady → Ready
after the boot delay (virtual time) → pods bound to it Running → instance terminated → Node removed → its pods
collected.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass

from karpy import clock
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import batcher, clients, ec2batch, provider
from karpy.kube import resources
from karpy_emulator import cluster, kubelet
from karpy_emulator.aws import seeding

BOOT_DELAY = 30.0
SMALL = [
    builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
    builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
]
DEDICATED = {"key": "dedicated", "value": "batch", "effect": labels.EFFECT_NO_SCHEDULE}


@pytest.fixture
async def emulated() -> AsyncIterator[cluster.EmulatedCluster]:
    options = cluster.ClusterOptions(cluster_name="kubelet-test", virtual_time=True, boot_delay=BOOT_DELAY)
    async with cluster.EmulatedCluster(options) as running:
        yield running


@pytest.fixture
async def aws_provider(emulated: cluster.EmulatedCluster) -> provider.AWSCloudProvider:
    aws = clients.build_clients(region=emulated.region, max_attempts=3)  # reads the cluster's AWS_ENDPOINT_URL
    seeding.install_fast_catalog(aws.ec2, region=emulated.region)
    assert emulated.seeded is not None
    nodeclass = make_nodeclass(role=emulated.seeded.node_role, discovery=emulated.cluster_name)
    classes: dict[str, ec2nodeclass.EC2NodeClass] = {}
    built = provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=emulated.clock.now,
            # Zero batch windows: the calls go out at once, without this test moving the manual clock for them.
            settings=provider.Settings(
                cluster_name=emulated.cluster_name,
                region=emulated.region,
                isolated_vpc=True,
                batch_windows=ec2batch.Windows(*(batcher.Window(0.0, 0.0, 1),) * 3),
            ),
            nodeclass_lookup=classes.get,
            sleep=emulated.clock.sleep,
            nodeclaims=tuple,
        )
    )
    resolved = await built.reconcile_nodeclass(nodeclass)
    classes[nodeclass.name] = ec2nodeclass.EC2NodeClass(
        metadata=nodeclass.metadata, spec=nodeclass.spec, status=resolved
    )
    return built


def _standin(emulated: cluster.EmulatedCluster) -> kubelet.Kubelet:
    assert emulated.kubelet is not None
    return emulated.kubelet


async def test_node_follows_the_instance(
    emulated: cluster.EmulatedCluster, aws_provider: provider.AWSCloudProvider
) -> None:
    manual = emulated.clock
    assert isinstance(manual, clock.ManualClock)
    api = emulated.client
    claim = builders.parsed_nodeclaim("default-x7k2p", requirements=SMALL, taints=[DEDICATED])
    launched = await aws_provider.create(claim)
    standin = _standin(emulated)

    report = await standin.sync()
    (name,) = report.registered
    node = await api.get(resources.NODES, name)
    assert node is not None
    assert node["spec"]["providerID"] == launched.status.provider_id
    node_labels = node["metadata"]["labels"]
    zone = launched.metadata.labels[labels.LABEL_ZONE]
    assert node_labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"
    assert node_labels[labels.LABEL_ZONE] == zone
    assert node_labels[labels.LABEL_REGION] == emulated.region
    assert node_labels[labels.LABEL_ARCH] == "amd64"
    assert node_labels[labels.LABEL_HOSTNAME] == name
    # From the launch (user data): the claim's labels, its single-valued requirements, the node class.
    assert node_labels[labels.LABEL_NODEPOOL] == "default"
    assert node_labels[labels.LABEL_CAPACITY_TYPE] == "on-demand"
    assert node_labels[labels.LABEL_EC2NODECLASS] == "default"
    taints = {(t["key"], t.get("value", ""), t["effect"]) for t in node["spec"]["taints"]}
    assert taints == {
        (labels.TAINT_UNREGISTERED_KEY, "", labels.EFFECT_NO_EXECUTE),
        ("dedicated", "batch", "NoSchedule"),
    }
    # m5.large: 2 vCPU, 8 GiB, 29 pods (ENI limit) — capacity of the type, allocatable below it.
    assert node["status"]["capacity"]["cpu"] == "2"
    assert node["status"]["capacity"]["pods"] == "29"
    assert node["status"]["allocatable"]["cpu"].endswith("m")  # kube-reserved CPU comes off
    assert not kubelet.is_ready(node)

    manual.advance(BOOT_DELAY - 1)
    assert (await standin.sync()).became_ready == []
    manual.advance(1)
    (shared,), _ = await emulated.reader.list(resources.NODES)
    listed = copy.deepcopy(shared)
    assert (await standin.sync()).became_ready == [name]
    assert shared == listed  # the store's own object, shared with every reader: turned Ready by a patch, not in place
    node = await api.get(resources.NODES, name)
    assert node is not None
    assert kubelet.is_ready(node)

    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": name, "containers": [{"name": "web", "image": "nginx"}]},
    }
    await api.create(resources.PODS, pod)
    assert (await standin.sync()).pods_started == ["default/web"]
    running = await api.get(resources.PODS, "web", namespace="default")
    assert running is not None
    assert running["status"]["phase"] == "Running"
    assert kubelet.pod_running(running)
    assert (await standin.sync()).pods_started == []  # nothing left to do

    await aws_provider.delete(launched)
    report = await standin.sync()
    assert report.removed == [name]
    assert await api.get(resources.NODES, name) is None
    assert (await standin.sync()).pods_collected == ["default/web"]  # pod GC of the vanished node
    assert await api.get(resources.PODS, "web", namespace="default") is None


async def test_foreign_nodes_are_left_alone(emulated: cluster.EmulatedCluster) -> None:
    api = emulated.client
    foreign = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "static"},
        "spec": {"providerID": "aws:///x/i-1"},
    }
    await api.create(resources.NODES, foreign)
    assert (await _standin(emulated).sync()).removed == []  # never touches nodes it did not register
    assert await api.get(resources.NODES, "static") is not None


async def test_an_instance_launched_in_moto_alone_makes_a_pass_due(
    emulated: cluster.EmulatedCluster, aws_provider: provider.AWSCloudProvider
) -> None:
    """Instances live in moto, not in the API server: a launch that no store write follows (no NodeClaim here)
    must still wake the kubelet, whose loop otherwise runs a pass only after a write it watches (`loop.Watch`)."""
    standin = _standin(emulated)
    now = emulated.clock.now()
    assert (await standin.sync()).registered == []
    assert not await standin._due(now)  # nothing launched, nothing booting: an idle tick skips the pass

    await aws_provider.create(builders.parsed_nodeclaim("default-m0t0a", requirements=SMALL))
    assert await standin._due(now)
    assert len((await standin.sync()).registered) == 1
    assert await standin._due(now)  # booting (30 s): time alone moves it on, so every tick looks
