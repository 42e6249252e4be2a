"""The seeded emulator resolves a node class to Ready (subnets, groups, alias AMIs via SSM, instance profile)."""

from __future__ import annotations

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import provider
from karpy_emulator.aws import seeding


async def test_node_class_resolves_ready(
    ready: tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass], seeded: seeding.Seeded
) -> None:
    _, nc = ready
    assert nc.condition(ec2nodeclass.READY) is not None
    assert {c.type: c.status for c in nc.status.conditions} == dict.fromkeys(
        (
            "SubnetsReady",
            "SecurityGroupsReady",
            "AMIsReady",
            "InstanceProfileReady",
            "ValidationSucceeded",
            "Ready",
        ),
        "True",
    ), nc.status.conditions
    assert sorted(s.id for s in nc.status.subnets) == sorted(seeded.subnet_ids)
    assert [g.id for g in nc.status.security_groups] == list(seeded.security_group_ids)
    assert {a.id for a in nc.status.amis} == set(seeded.images.values())
    standard = next(a for a in nc.status.amis if "x86_64-standard" in a.name)
    assert any(r.key == labels.LABEL_ARCH and r.values == ("amd64",) for r in standard.requirements)
    assert nc.status.instance_profile.startswith("test-cluster_")
