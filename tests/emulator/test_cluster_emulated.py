"""EmulatedCluster end to end in virtual time: a tagged instance joins, a Deployment's pods land and run on it;
everything stops cleanly (env restored, no thread or task left)."""

from __future__ import annotations

import asyncio
import os
import threading

import boto3

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import userdata
from karpy.kube import resources
from karpy_emulator import cluster, workloads

CLUSTER = "emulated-test"


def _launch(region: str, zone_subnet: str) -> str:
    """An instance as the provider would tag it, with the user data a NodePool "default" launch renders."""
    text = userdata.render(
        ec2nodeclass.AMIFamily.AL2023,
        userdata.BootstrapOptions(
            cluster_name=CLUSTER,
            cluster_endpoint="https://example",
            ca_bundle="Q0E=",
            cluster_cidr="10.100.0.0/16",
            labels={labels.LABEL_NODEPOOL: "default"},
        ),
    )
    ec2 = boto3.client("ec2", region_name=region)
    image = ec2.describe_images(Owners=["self"])["Images"][0]["ImageId"]
    tags = [
        {"Key": f"{labels.TAG_CLUSTER_PREFIX}{CLUSTER}", "Value": "owned"},
        {"Key": labels.TAG_NODEPOOL, "Value": "default"},
    ]
    answer = ec2.run_instances(
        ImageId=image,
        InstanceType="m5.xlarge",
        MinCount=1,
        MaxCount=1,
        SubnetId=zone_subnet,
        UserData=text,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return str(answer["Instances"][0]["InstanceId"])


async def test_pods_of_a_deployment_run_on_a_joined_instance() -> None:
    threads_before = {t.ident for t in threading.enumerate()}
    previous = os.environ.get("AWS_ENDPOINT_URL")
    options = cluster.ClusterOptions(cluster_name=CLUSTER, virtual_time=True, boot_delay=20.0, interval=5.0)
    async with cluster.EmulatedCluster(options) as emulated:
        assert os.environ["AWS_ENDPOINT_URL"] == emulated.aws_endpoint_url
        assert emulated.kubeconfig.read_text().count(emulated.api_url) == 1
        assert emulated.queue_name == CLUSTER
        assert emulated.seeded is not None
        instance_id = await asyncio.to_thread(_launch, emulated.region, emulated.seeded.subnet_ids[0])
        api = emulated.client
        # EKS' view of the service CIDR and the kube-dns Service at its tenth address agree, as on a real cluster.
        described = boto3.client("eks", region_name=emulated.region).describe_cluster(name=CLUSTER)["cluster"]
        assert described["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "172.20.0.0/16"
        kube_dns = await api.get(resources.SERVICES, "kube-dns", namespace="kube-system")
        assert kube_dns is not None
        assert kube_dns["spec"]["clusterIP"] == "172.20.0.10"
        inflate = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "inflate"}},
                "template": {
                    "metadata": {"labels": {"app": "inflate"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
                        # The launch's unregistered taint stays (no controller here): tolerate it.
                        "tolerations": [{"key": labels.TAINT_UNREGISTERED_KEY, "operator": "Exists"}],
                    },
                },
            },
        }
        await api.create(workloads.DEPLOYMENTS, inflate)

        await emulated.run_for(10.0)  # node registered but still booting: pods pending and unschedulable
        pods, _ = await api.list(resources.PODS, namespace="default")
        assert len(pods) == 3
        assert all(not p["spec"].get("nodeName") for p in pods)
        assert {c["reason"] for p in pods for c in p["status"]["conditions"]} == {"Unschedulable"}

        emulated.api.accesses.clear()
        await emulated.run_for(15.0)  # booted (20 s): bound and running
        # The stand-ins read the shared view of the store (`reads`), as controllers read informer caches: their
        # passes write (bind, start pods, turn the node Ready) but never LIST or WATCH over HTTP.
        verbs = {a.verb for a in emulated.api.accesses.snapshot()}
        assert {"create", "patch"} <= verbs
        assert verbs.isdisjoint({"list", "watch"})
        pods, _ = await api.list(resources.PODS, namespace="default")
        nodes, _ = await api.list(resources.NODES)
        (node,) = nodes
        assert node["spec"]["providerID"].endswith(instance_id)
        assert {p["spec"].get("nodeName") for p in pods} == {node["metadata"]["name"]}
        assert {p["status"]["phase"] for p in pods} == {"Running"}
        await emulated.run_for(5.0)  # the workload controller sees the pods Ready on its next pass
        stored = await api.get(workloads.DEPLOYMENTS, "inflate", namespace="default")
        assert stored is not None
        assert stored["status"]["readyReplicas"] == 3

    assert os.environ.get("AWS_ENDPOINT_URL") == previous
    # asyncio_N threads are the event loop's default executor (asyncio.to_thread); the loop shuts them down.
    leaked = [t for t in threading.enumerate() if t.ident not in threads_before and not t.name.startswith("asyncio_")]
    assert leaked == []
