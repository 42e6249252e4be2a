"""EC2 instances ↔ NodeClaims: provider ids, the NodeClaim view of an instance (pure), and the describe filters."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from karpy.api import labels, meta, nodeclaim
from karpy.cloudprovider import tenancy, types

PROVIDER_ID_PREFIX = "aws:///"
LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
GONE_STATES = frozenset({"terminated"})


class BadProviderID(ValueError):
    pass


def provider_id(zone: str, instance_id: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{zone}/{instance_id}"


def parse_provider_id(value: str) -> str:
    """The instance id of `aws:///<zone>/<instance-id>`."""
    if not value.startswith(PROVIDER_ID_PREFIX):
        raise BadProviderID(f"provider id {value!r} is not aws:///<zone>/<instance-id>")
    instance_id = value.rsplit("/", 1)[-1]
    if not instance_id.startswith("i-"):
        raise BadProviderID(f"provider id {value!r} has no instance id")
    return instance_id


_KEPT: Final = (
    "InstanceId",
    "InstanceType",
    "State",
    "ImageId",
    "SubnetId",
    "SecurityGroups",
    "Placement",
    "Tags",
    "LaunchTime",
    "CapacityReservationId",
    "InstanceLifecycle",
)
"""What the provider reads of an instance (the NodeClaim view, drift, termination)."""


def slim(instance: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a DescribeInstances entry the provider reads, for its instance cache: a full entry is several
    kilobytes of interfaces and block devices per node. Interfaces keep only their groups and attachment index,
    which `security_group_ids` falls back on."""
    out = {key: instance[key] for key in _KEPT if key in instance}
    if not out.get("SecurityGroups") and instance.get("NetworkInterfaces"):
        out["NetworkInterfaces"] = [
            {"Attachment": {"DeviceIndex": (n.get("Attachment") or {}).get("DeviceIndex")}, "Groups": n.get("Groups")}
            for n in instance["NetworkInterfaces"]
        ]
    return out


def cluster_filters(cluster_name: str) -> list[dict[str, Any]]:
    """Instances this cluster launched (the tags every launch carries) that are not terminated."""
    return [
        {"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{cluster_name}", "Values": ["owned"]},
        {"Name": "tag-key", "Values": [labels.TAG_NODEPOOL]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
    ]


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def security_group_ids(instance: Mapping[str, Any]) -> frozenset[str]:
    """The instance's groups; from its primary interface when the instance-level list is empty (they are the same
    on EC2, and emulators sometimes fill only the interface)."""
    groups = instance.get("SecurityGroups") or ()
    if not groups:
        primary = [
            n for n in instance.get("NetworkInterfaces") or () if n.get("Attachment", {}).get("DeviceIndex") == 0
        ]
        groups = (primary or list(instance.get("NetworkInterfaces") or ()) or [{}])[0].get("Groups") or ()
    return frozenset(str(g["GroupId"]) for g in groups)


def capacity_type_of(instance: Mapping[str, Any]) -> str:
    if instance.get("InstanceLifecycle") == "spot":
        return labels.CAPACITY_TYPE_SPOT
    if instance.get("CapacityReservationId"):
        return labels.CAPACITY_TYPE_RESERVED
    return labels.CAPACITY_TYPE_ON_DEMAND


def nodeclaim_from_instance(
    instance: Mapping[str, Any],
    *,
    instance_type: types.InstanceType | None,
    node_class_ref: meta.NodeClassRef,
) -> nodeclaim.NodeClaim:
    """What the cloud knows of a NodeClaim: name from its tag, labels from the shape and placement, capacity."""
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags") or ()}
    zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
    node_labels: dict[str, str] = dict(instance_type.labels) if instance_type else {}
    node_labels.update(
        {
            labels.LABEL_INSTANCE_TYPE: str(instance.get("InstanceType", "")),
            labels.LABEL_ZONE: zone,
            labels.LABEL_CAPACITY_TYPE: capacity_type_of(instance),
            # EC2 leaves the tenancy out for shared hardware.
            labels.LABEL_INSTANCE_TENANCY: str((instance.get("Placement") or {}).get("Tenancy") or tenancy.DEFAULT),
        }
    )
    if instance.get("CapacityReservationId"):
        node_labels[labels.LABEL_CAPACITY_RESERVATION_ID] = str(instance["CapacityReservationId"])
        # What EC2 says of the instance's lifecycle tells the reservation's kind (aws: instance/types.go).
        lifecycle = instance.get("InstanceLifecycle")
        node_labels[labels.LABEL_CAPACITY_RESERVATION_TYPE] = (
            "capacity-block" if lifecycle == "capacity-block" else "default"
        )
        node_labels[labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] = (
            "true" if lifecycle == "interruptible-capacity-reservation" else "false"
        )
    for tag in (labels.TAG_NODEPOOL, labels.TAG_EC2NODECLASS):
        if tag in tags:
            node_labels[tag] = tags[tag]
    launched = _epoch(instance.get("LaunchTime"))
    return nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(
            name=tags.get(labels.TAG_NODECLAIM, ""),
            labels=node_labels,
            creation_timestamp=launched,
        ),
        spec=nodeclaim.NodeClaimSpec(node_class_ref=node_class_ref),
        status=nodeclaim.NodeClaimStatus(
            provider_id=provider_id(zone, str(instance["InstanceId"])),
            image_id=str(instance.get("ImageId", "")),
            capacity=dict(instance_type.capacity) if instance_type else {},
            allocatable=dict(instance_type.allocatable) if instance_type else {},
        ),
    )
