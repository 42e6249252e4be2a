"""Instances karpy did not launch are never listed, so never garbage collected (aws: the cluster instance listing
filters on `kubernetes.io/cluster/<name>: owned` and the `karpenter.sh/nodepool` tag key, as upstream's
instance provider does in pkg/providers/instance/instance.go). On moto, through the real GC pass."""

from __future__ import annotations

from typing import Any

import boto3
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import instances, provider
from karpy.kube import fake, resources
from karpy.nodeclaim import controller, lifecycle_observer, registration, written
from karpy_emulator.aws import seeding

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]
OWNED = {f"kubernetes.io/cluster/{CLUSTER}": "owned"}
FOREIGN = {
    # a managed node group's instance: this cluster's tag, no NodePool tag
    "managed-node-group": {**OWNED, "eks:nodegroup-name": "system"},
    # another cluster's karpy or Karpenter instance
    "other-cluster": {"kubernetes.io/cluster/other": "owned", labels.TAG_NODEPOOL: "default"},
    # shared with this cluster, not owned by it
    "shared": {f"kubernetes.io/cluster/{CLUSTER}": "shared", labels.TAG_NODEPOOL: "default"},
}


def run_instance(ec2: Any, seeded: seeding.Seeded, tags: dict[str, str]) -> str:
    reservation = ec2.run_instances(
        ImageId=next(iter(seeded.images.values())),
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=seeded.subnet_ids[0],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return str(reservation["Instances"][0]["InstanceId"])


def _state(ec2: Any, instance_id: str) -> str:
    found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(found["State"]["Name"])


async def test_instances_karpy_did_not_launch_are_neither_listed_nor_collected(
    ready: Ready, seeded: seeding.Seeded
) -> None:
    aws_provider, _ = ready
    ec2 = boto3.client("ec2", region_name=REGION)
    foreign = {name: run_instance(ec2, seeded, tags) for name, tags in FOREIGN.items()}
    ours = await aws_provider.create(
        builders.parsed_nodeclaim(requirements=(builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),))
    )

    listed = await aws_provider.list()
    assert [c.status.provider_id for c in listed] == [ours.status.provider_id]

    # No NodeClaim at all, an hour after the launch: every instance the GC can see is leaked.
    launched = listed[0].metadata.creation_timestamp
    assert launched is not None
    clock = karpy_clock.ManualClock(launched + 3600)
    kube = fake.FakeKubeClient(clock)
    gc = controller.NodeClaimController(
        controller.Deps(
            client=kube,
            cloud=aws_provider,
            clock=clock,
            observer=lifecycle_observer.Observer(events.MemoryRecorder(), lifecycle_observer.Metrics()),
            rejections=rejections.Discard(),
            registration=registration.RegistrationHealth(),
            nodes_for_provider_id=lambda pid: [
                n for n in kube.all(resources.NODES) if (n.get("spec") or {}).get("providerID") == pid
            ],
            claims=lambda _: None,  # garbage collection reads no claim by name
            own_writes=written.Written(),
            leading_since=lambda: launched,  # leading since the launch: no claim to adopt for
        )
    )
    await gc.collect_garbage()
    assert _state(ec2, instances.parse_provider_id(ours.status.provider_id)) in instances.GONE_STATES | {
        "shutting-down"
    }
    assert {name: _state(ec2, iid) for name, iid in foreign.items()} == dict.fromkeys(FOREIGN, "running")
