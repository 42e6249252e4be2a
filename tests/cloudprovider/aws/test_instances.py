"""An EC2 instance as the NodeClaim the cloud knows of (pure, table tests)."""

from __future__ import annotations

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
