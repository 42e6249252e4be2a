"""Provider-side drift: does a running instance still match its EC2NodeClass? Pure (aws: pkg/cloudprovider/drift.go).

Checked in upstream's order: node class hash, AMI, subnet, security groups, capacity reservation. An empty
resolved status (the node class not reconciled yet) is never reported as drift.
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
) -> types.DriftReason | None:
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
    return None
