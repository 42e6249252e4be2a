"""Provider drift (pure, table tests)."""

from __future__ import annotations

import dataclasses

import pytest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass

from karpy.api import ec2nodeclass, hashing, labels, nodeclaim
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import drift

STATUS = ec2nodeclass.EC2NodeClassStatus(
    subnets=(ec2nodeclass.SubnetStatus("subnet-1", "z1"), ec2nodeclass.SubnetStatus("subnet-2", "z2")),
    security_groups=(ec2nodeclass.SecurityGroupStatus("sg-1"), ec2nodeclass.SecurityGroupStatus("sg-2")),
    amis=(ec2nodeclass.AMIStatus("ami-new"),),
)
GOOD = drift.InstanceFacts("ami-new", "subnet-2", frozenset({"sg-1", "sg-2"}))
H = labels.ANNOTATION_EC2NODECLASS_HASH
V = labels.ANNOTATION_EC2NODECLASS_HASH_VERSION


@pytest.mark.parametrize(
    ("claim_ann", "class_ann", "instance", "expected"),
    [
        ({H: "1", V: "v6"}, {H: "1", V: "v6"}, GOOD, None),
        ({H: "1", V: "v6"}, {H: "2", V: "v6"}, GOOD, types.DriftReason.NODE_CLASS),
        ({H: "1", V: "v5"}, {H: "2", V: "v6"}, GOOD, None),  # hash version changed: not drift
        ({}, {H: "2", V: "v6"}, GOOD, None),
        ({}, {}, drift.InstanceFacts("ami-old", "subnet-2", GOOD.security_group_ids), types.DriftReason.AMI),
        ({}, {}, drift.InstanceFacts("ami-new", "subnet-9", GOOD.security_group_ids), types.DriftReason.SUBNET),
        ({}, {}, drift.InstanceFacts("ami-new", "subnet-1", frozenset({"sg-1"})), types.DriftReason.SECURITY_GROUP),
        (
            {},
            {},
            drift.InstanceFacts("ami-new", "subnet-1", frozenset({"sg-1", "sg-2", "sg-3"})),
            types.DriftReason.SECURITY_GROUP,
        ),
        # hash is checked first
        (
            {H: "1", V: "v6"},
            {H: "2", V: "v6"},
            drift.InstanceFacts("ami-old", "x", frozenset()),
            types.DriftReason.NODE_CLASS,
        ),
    ],
)
def test_drift_reason(
    claim_ann: dict[str, str],
    class_ann: dict[str, str],
    instance: drift.InstanceFacts,
    expected: types.DriftReason | None,
) -> None:
    claim = builders.parsed_nodeclaim(annotations=claim_ann, requirements=[])
    nodeclass = dataclasses.replace(make_nodeclass(annotations=class_ann), status=STATUS)
    assert drift.drift_reason(claim, nodeclass, instance) == expected


def _labelled(key: str, value: str) -> nodeclaim.NodeClaim:
    """A launched claim, with label `key` when `value` is not empty."""
    claim = builders.parsed_nodeclaim(requirements=[])
    if not value:
        return claim
    return dataclasses.replace(
        claim, metadata=dataclasses.replace(claim.metadata, labels={**claim.metadata.labels, key: value})
    )


def test_unresolved_status_is_never_drift() -> None:
    facts = drift.InstanceFacts("ami-any", "subnet-any", frozenset({"sg-any"}))
    assert drift.drift_reason(builders.parsed_nodeclaim(requirements=[]), make_nodeclass(), facts) is None


@pytest.mark.parametrize(
    ("claim_reservation", "resolved", "expected"),
    [
        ("", (), None),  # not a reserved node
        ("cr-1", ("cr-1", "cr-2"), None),
        ("cr-1", ("cr-2",), types.DriftReason.CAPACITY_RESERVATION),  # expired or no longer selected
        ("cr-1", (), types.DriftReason.CAPACITY_RESERVATION),
    ],
)
def test_capacity_reservation_drift(
    claim_reservation: str, resolved: tuple[str, ...], expected: types.DriftReason | None
) -> None:
    claim = _labelled(labels.LABEL_CAPACITY_RESERVATION_ID, claim_reservation)
    status = dataclasses.replace(
        STATUS,
        capacity_reservations=tuple(
            ec2nodeclass.CapacityReservationStatus(
                id=cr, availability_zone="z1", instance_type="m5.large", owner_id="123456789012"
            )
            for cr in resolved
        ),
    )
    assert drift.drift_reason(claim, dataclasses.replace(make_nodeclass(), status=status), GOOD) == expected


@pytest.mark.parametrize(
    "changes",
    [
        {"connection_tracking": ec2nodeclass.ConnectionTracking(tcp_established_timeout=600)},
        {"cpu_options": ec2nodeclass.CPUOptions(nested_virtualization="enabled")},
        {"enclave_options": ec2nodeclass.EnclaveOptions(enabled=True)},
    ],
)
def test_launch_options_drift_existing_nodes(changes: dict[str, object]) -> None:
    """They are fixed at launch (EC2 cannot change them on a running instance): changing one must drift the nodes
    launched before, through the EC2NodeClass hash the claim was stamped with."""
    before = make_nodeclass()
    after = dataclasses.replace(before, spec=dataclasses.replace(before.spec, **changes))
    stamped = {H: hashing.ec2nodeclass_hash(before), V: labels.EC2NODECLASS_HASH_VERSION}
    claim = builders.parsed_nodeclaim(annotations=stamped, requirements=[])
    now = {H: hashing.ec2nodeclass_hash(after), V: labels.EC2NODECLASS_HASH_VERSION}
    assert now[H] != stamped[H]
    nodeclass = dataclasses.replace(make_nodeclass(annotations=now), status=STATUS)
    nodeclass = dataclasses.replace(nodeclass, spec=after.spec)
    assert drift.drift_reason(claim, nodeclass, GOOD) is types.DriftReason.NODE_CLASS


@pytest.mark.parametrize(
    ("label", "instance_group", "wanted", "expected"),
    [
        ("", "", "", None),  # no group then, none now
        ("pg-1", "", "pg-1", None),
        ("pg-1", "", "pg-2", types.DriftReason.PLACEMENT_GROUP),  # the class now selects another group
        ("pg-1", "", "", types.DriftReason.PLACEMENT_GROUP),  # the class no longer selects one
        ("", "", "pg-1", types.DriftReason.PLACEMENT_GROUP),  # the class now selects one
        ("", "pg-1", "pg-1", None),  # launched before claims were labelled: EC2's Placement.GroupId tells
        ("pg-1", "", None, None),  # the selected group cannot be resolved now: never drift on it
        ("", "", None, None),
    ],
)
def test_placement_group_drift(
    label: str, instance_group: str, wanted: str | None, expected: types.DriftReason | None
) -> None:
    claim = _labelled(labels.LABEL_PLACEMENT_GROUP_ID, label)
    instance = dataclasses.replace(GOOD, placement_group_id=instance_group)
    nodeclass = dataclasses.replace(make_nodeclass(), status=STATUS)
    assert drift.drift_reason(claim, nodeclass, instance, placement_group_id=wanted) == expected
