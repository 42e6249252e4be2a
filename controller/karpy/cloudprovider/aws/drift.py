"""Provider-side drift: does a running instance still match its EC2NodeClass? Pure (aws: pkg/cloudprovider/drift.go).

Checked in upstream's order: node class hash, AMI, subnet, security groups, capacity reservation, placement group.
An empty resolved status (the node class not reconciled yet) is never reported as drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.api import ec2nodeclass, labels, nodeclaim
from karpy.cloudprovider import types


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """What EC2 says about the instance behind a NodeClaim."""

    image_id: str
    subnet_id: str
    security_group_ids: frozenset[str]
    placement_group_id: str = ""
    """`Placement.GroupId` ("" outside a group): what a claim launched before karpy labelled it is compared by."""


def hash_drifted(claim: nodeclaim.NodeClaim, nodeclass: ec2nodeclass.EC2NodeClass) -> bool:
    """Hashes differ under the same hash version; a missing annotation on either side is not drift."""
    claim_ann, class_ann = claim.metadata.annotations, nodeclass.metadata.annotations
    claim_hash = claim_ann.get(labels.ANNOTATION_EC2NODECLASS_HASH)
    class_hash = class_ann.get(labels.ANNOTATION_EC2NODECLASS_HASH)
    if not claim_hash or not class_hash:
        return False
    claim_version = claim_ann.get(labels.ANNOTATION_EC2NODECLASS_HASH_VERSION)
    class_version = class_ann.get(labels.ANNOTATION_EC2NODECLASS_HASH_VERSION)
    if claim_version != class_version:
        return False
    return claim_hash != class_hash


def drift_reason(
    claim: nodeclaim.NodeClaim,
    nodeclass: ec2nodeclass.EC2NodeClass,
    instance: InstanceFacts,
    *,
    placement_group_id: str | None = "",
) -> types.DriftReason | None:
    """`placement_group_id` is the group the class launches into today: "" for none, None when the class selects a
    group that cannot be resolved now (a deleted group cannot hold instances, and a NotReady class could not launch
    a replacement: never drift on it)."""
    if hash_drifted(claim, nodeclass):
        return types.DriftReason.NODE_CLASS
    status = nodeclass.status
    if status.amis and instance.image_id not in {a.id for a in status.amis}:
        return types.DriftReason.AMI
    if status.subnets and instance.subnet_id not in {s.id for s in status.subnets}:
        return types.DriftReason.SUBNET
    if status.security_groups and instance.security_group_ids != {g.id for g in status.security_groups}:
        return types.DriftReason.SECURITY_GROUP
    reservation = claim.metadata.labels.get(labels.LABEL_CAPACITY_RESERVATION_ID, "")
    if reservation and reservation not in {cr.id for cr in status.capacity_reservations}:
        # The reservation expired or no longer matches the selector terms: the node runs outside of it.
        return types.DriftReason.CAPACITY_RESERVATION
    if placement_group_id is not None:
        # aws: isPlacementGroupDrifted: a selector added, removed or pointed at another group.
        launched_into = claim.metadata.labels.get(labels.LABEL_PLACEMENT_GROUP_ID) or instance.placement_group_id
        if launched_into != placement_group_id:
            return types.DriftReason.PLACEMENT_GROUP
    return None
