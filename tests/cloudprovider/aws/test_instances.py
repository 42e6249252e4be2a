"""An EC2 instance as the NodeClaim the cloud knows of (pure, table tests)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from karpy.api import labels, meta
from karpy.cloudprovider.aws import instances

REF = meta.NodeClassRef(group=labels.AWS_GROUP, kind="EC2NodeClass", name="default")


def _instance(**extra: Any) -> dict[str, Any]:
    return {
        "InstanceId": "i-1",
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": "us-east-1a"},
        "Tags": [{"Key": "karpenter.sh/nodeclaim", "Value": "default-x"}],
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "capacity_type", "reservation"),
    [
        ({}, "on-demand", None),
        ({"InstanceLifecycle": "spot"}, "spot", None),
        ({"CapacityReservationId": "cr-1"}, "reserved", "cr-1"),
    ],
)
def test_capacity_type_and_reservation_label(
    extra: dict[str, Any], capacity_type: str, reservation: str | None
) -> None:
    claim = instances.nodeclaim_from_instance(_instance(**extra), instance_type=None, node_class_ref=REF)
    assert claim.name == "default-x"
    assert claim.status.provider_id == "aws:///us-east-1a/i-1"
    assert claim.metadata.labels[labels.LABEL_CAPACITY_TYPE] == capacity_type
    assert claim.metadata.labels.get(labels.LABEL_CAPACITY_RESERVATION_ID) == reservation


def _eni(index: int | None, *groups: str) -> dict[str, Any]:
    eni: dict[str, Any] = {"Groups": [{"GroupId": g} for g in groups]}
    if index is not None:
        eni["Attachment"] = {"DeviceIndex": index}
    return eni


@pytest.mark.parametrize(
    ("instance", "groups"),
    [
        ({"SecurityGroups": [{"GroupId": "sg-a"}, {"GroupId": "sg-b"}]}, {"sg-a", "sg-b"}),
        ({"SecurityGroups": [{"GroupId": "sg-a"}], "NetworkInterfaces": [_eni(0, "sg-x")]}, {"sg-a"}),
        ({"NetworkInterfaces": [_eni(1, "sg-second"), _eni(0, "sg-primary")]}, {"sg-primary"}),
        ({"SecurityGroups": [], "NetworkInterfaces": [_eni(None, "sg-only")]}, {"sg-only"}),
        ({"NetworkInterfaces": [_eni(1, "sg-first"), _eni(2, "sg-later")]}, {"sg-first"}),
        ({"NetworkInterfaces": [{"Attachment": {"DeviceIndex": 0}}]}, set()),
        ({}, set()),
    ],
)
def test_security_groups_come_from_the_instance_else_its_primary_interface(
    instance: dict[str, Any], groups: set[str]
) -> None:
    assert instances.security_group_ids(instance) == groups


def test_the_claim_view_of_an_instance_carries_its_type_placement_tags_and_launch_time() -> None:
    claim = instances.nodeclaim_from_instance(
        _instance(
            ImageId="ami-1",
            LaunchTime="2024-01-02T03:04:05Z",
            Tags=[
                {"Key": "karpenter.sh/nodeclaim", "Value": "default-x"},
                {"Key": labels.TAG_NODEPOOL, "Value": "team"},
                {"Key": labels.TAG_EC2NODECLASS, "Value": "fast"},
                {"Key": "Name", "Value": "ignored"},
            ],
        ),
        instance_type=None,
        node_class_ref=REF,
    )
    assert claim.metadata.labels == {
        labels.LABEL_INSTANCE_TYPE: "m5.large",
        labels.LABEL_ZONE: "us-east-1a",
        labels.LABEL_CAPACITY_TYPE: "on-demand",
        labels.LABEL_INSTANCE_TENANCY: "default",  # EC2 says nothing of shared hardware
        labels.TAG_NODEPOOL: "team",
        labels.TAG_EC2NODECLASS: "fast",
    }
    assert claim.metadata.creation_timestamp == 1704164645.0
    assert (claim.status.image_id, claim.spec.node_class_ref) == ("ami-1", REF)
    assert (claim.status.capacity, claim.status.allocatable) == ({}, {})
    bare = instances.nodeclaim_from_instance({"InstanceId": "i-2"}, instance_type=None, node_class_ref=REF)
    assert (bare.name, bare.status.provider_id, bare.metadata.creation_timestamp) == ("", "aws:////i-2", None)
    assert bare.metadata.labels[labels.LABEL_INSTANCE_TYPE] == ""


@pytest.mark.parametrize(
    ("value", "epoch"),
    [
        (datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), 1704164645.0),
        ("2024-01-02T03:04:05+00:00", 1704164645.0),
        ("2024-01-02T03:04:05Z", 1704164645.0),
        ("", None),
        (None, None),
    ],
)
def test_launch_time_as_epoch(value: Any, epoch: float | None) -> None:
    claim = instances.nodeclaim_from_instance(_instance(LaunchTime=value), instance_type=None, node_class_ref=REF)
    assert claim.metadata.creation_timestamp == epoch


@pytest.mark.parametrize(
    ("value", "instance_id"),
    [("aws:///us-east-1a/i-0abc", "i-0abc"), ("aws:///us-east-1a/", None), ("fake://z/i-1", None), ("i-1", None)],
)
def test_parse_provider_id(value: str, instance_id: str | None) -> None:
    if instance_id is None:
        with pytest.raises(instances.BadProviderID):
            instances.parse_provider_id(value)
    else:
        assert instances.parse_provider_id(value) == instance_id


def test_the_instance_type_fills_labels_capacity_and_allocatable() -> None:
    from karpy.cloudprovider.fake import generator

    shape = generator.new_instance_type("m5.large", {labels.RESOURCE_CPU: 2000, labels.RESOURCE_MEMORY: 8 * 2**30})
    claim = instances.nodeclaim_from_instance(_instance(), instance_type=shape, node_class_ref=REF)
    assert shape.labels.items() - {(labels.LABEL_INSTANCE_TYPE, "m5.large")} <= claim.metadata.labels.items()
    assert claim.status.capacity == dict(shape.capacity)
    assert claim.status.allocatable == dict(shape.allocatable)
    assert claim.status.image_id == ""  # no ImageId in the description


def test_a_bad_provider_id_is_named_in_the_error() -> None:
    with pytest.raises(instances.BadProviderID, match="'gce://p/z/i-1' is not aws:///<zone>/<instance-id>"):
        instances.parse_provider_id("gce://p/z/i-1")


def test_a_provider_id_without_an_instance_is_named_in_the_error() -> None:
    with pytest.raises(instances.BadProviderID, match="'aws:///us-east-1a/' has no instance id"):
        instances.parse_provider_id("aws:///us-east-1a/")


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({"InstanceId": "i-1"}, {}),
        (
            {"InstanceId": "i-1", "CapacityReservationId": "cr-1"},
            {"capacity-reservation-type": "default", "capacity-reservation-interruptible": "false"},
        ),
        (
            {"InstanceId": "i-1", "CapacityReservationId": "cr-1", "InstanceLifecycle": "capacity-block"},
            {"capacity-reservation-type": "capacity-block", "capacity-reservation-interruptible": "false"},
        ),
        (
            {
                "InstanceId": "i-1",
                "CapacityReservationId": "cr-1",
                "InstanceLifecycle": "interruptible-capacity-reservation",
            },
            {"capacity-reservation-type": "default", "capacity-reservation-interruptible": "true"},
        ),
    ],
)
def test_reserved_instances_carry_the_reservations_kind(instance: dict[str, str], expected: dict[str, str]) -> None:
    claim = instances.nodeclaim_from_instance(instance, instance_type=None, node_class_ref=REF)
    prefix = "karpenter.k8s.aws/"
    assert {
        k.removeprefix(prefix): v
        for k, v in claim.metadata.labels.items()
        if k in (labels.LABEL_CAPACITY_RESERVATION_TYPE, labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE)
    } == expected
