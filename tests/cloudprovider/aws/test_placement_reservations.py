"""Placement group and capacity reservation selection (pure builders and parsers, table tests)."""

from __future__ import annotations

import datetime

import pytest

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import cache, instancetypes, placement, reservations, selectors

_UTC = datetime.UTC


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (ec2nodeclass.PlacementGroupSelector(name="training"), {"GroupNames": ["training"]}),
        (ec2nodeclass.PlacementGroupSelector(id="pg-0abc"), {"GroupIds": ["pg-0abc"]}),
    ],
)
def test_placement_group_query(selector: ec2nodeclass.PlacementGroupSelector, expected: dict[str, object]) -> None:
    assert placement.query(selector) == expected


_GROUP = {
    "GroupId": "pg-1",
    "GroupName": "training",
    "Strategy": "partition",
    "State": "available",
    "PartitionCount": 3,
}


@pytest.mark.parametrize(
    ("described", "message"),
    [
        ([_GROUP], ""),
        ([], "no placement group matched name training"),
        ([{**_GROUP, "State": "pending"}], "placement group training is pending, not available"),
        ([{**_GROUP, "State": "deleting"}], "placement group training is deleting, not available"),
    ],
)
def test_placement_group_readiness(described: list[dict[str, object]], message: str) -> None:
    found = placement.from_describe(described)
    assert placement.readiness(ec2nodeclass.PlacementGroupSelector(name="training"), found) == message
    if described:
        assert found == placement.PlacementGroup(
            id="pg-1", name="training", strategy="partition", state=str(described[0]["State"]), partition_count=3
        )


def test_security_group_vpc_narrows_the_match() -> None:
    term = ec2nodeclass.SecurityGroupSelectorTerm(name="nodes", vpc_id="vpc-9")
    assert selectors.security_group_filters(term) == [
        {"Name": "group-name", "Values": ["nodes"]},
        {"Name": "vpc-id", "Values": ["vpc-9"]},
    ]
    assert selectors.security_group_filters(ec2nodeclass.SecurityGroupSelectorTerm(name="nodes")) == [
        {"Name": "group-name", "Values": ["nodes"]}
    ]


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        (ec2nodeclass.CapacityReservationSelectorTerm(id="cr-1"), {"Filters": [], "CapacityReservationIds": ["cr-1"]}),
        (
            ec2nodeclass.CapacityReservationSelectorTerm(
                tags={"team": "ml", "any": "*"}, owner_id="123456789012", instance_match_criteria="targeted"
            ),
            {
                "Filters": [
                    {"Name": "tag-key", "Values": ["any"]},
                    {"Name": "tag:team", "Values": ["ml"]},
                    {"Name": "owner-id", "Values": ["123456789012"]},
                    {"Name": "instance-match-criteria", "Values": ["targeted"]},
                ]
            },
        ),
    ],
)
def test_capacity_reservation_query(
    term: ec2nodeclass.CapacityReservationSelectorTerm, expected: dict[str, object]
) -> None:
    assert reservations.query(term) == expected


def _cr(cr_id: str, **extra: object) -> dict[str, object]:
    return {
        "CapacityReservationId": cr_id,
        "AvailabilityZone": "us-east-1a",
        "InstanceType": "p5.48xlarge",
        "OwnerId": "123456789012",
        "InstanceMatchCriteria": "targeted",
        "State": "active",
        **extra,
    }


def test_capacity_reservations_keep_usable_ones_once_in_id_order() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=_UTC).timestamp()
    end = datetime.datetime(2026, 1, 2, tzinfo=_UTC)
    described = [
        _cr("cr-2", ReservationType="capacity-block", EndDate=end),
        _cr("cr-1"),
        _cr("cr-1"),  # matched by two terms
        _cr("cr-3", State="expired"),
        _cr("cr-4", EndDate=datetime.datetime(2025, 12, 31, tzinfo=_UTC)),  # already over
        _cr("cr-5", State="cancelled"),
    ]
    found = reservations.from_describe(described, now=now)
    assert [c.id for c in found] == ["cr-1", "cr-2"]
    assert found[0] == ec2nodeclass.CapacityReservationStatus(
        id="cr-1",
        availability_zone="us-east-1a",
        instance_type="p5.48xlarge",
        owner_id="123456789012",
        instance_match_criteria="targeted",
    )
    assert found[1].reservation_type == "capacity-block"
    assert found[1].end_time == end.timestamp()
    assert found[1].state == "active"


@pytest.mark.parametrize(
    ("minutes_left", "kind", "state"),
    [
        (41, "capacity-block", "active"),
        (40, "capacity-block", "expiring"),  # upstream: 40 minutes before the end, EC2 reclaims at 30
        (1, "capacity-block", "expiring"),
        (1, "default", "active"),  # only capacity blocks expire this way
    ],
)
def test_a_capacity_block_is_expiring_in_its_last_40_minutes(minutes_left: int, kind: str, state: str) -> None:
    end = datetime.datetime(2026, 1, 2, tzinfo=_UTC)
    (found,) = reservations.from_describe(
        [_cr("cr-1", ReservationType=kind, EndDate=end)], now=end.timestamp() - minutes_left * 60
    )
    assert found.state == state


def test_an_expiring_reservation_offers_nothing() -> None:
    expiring = ec2nodeclass.CapacityReservationStatus(
        id="cr-1", availability_zone="us-east-1a", instance_type="m5.large", owner_id="1", state="expiring"
    )
    (offer,) = instancetypes.reserved_offerings(
        "m5.large",
        reservations=(expiring,),
        zones=(("us-east-1a", "use1-az1"),),
        od_price=0.1,
        unavailable=cache.UnavailableOfferings(clock=lambda: 0.0),
    )
    assert not offer.available


def test_reserved_offerings_one_per_reservation_of_the_type_in_the_node_class_zones() -> None:
    def cr(cr_id: str, zone: str, instance_type: str = "m5.large") -> ec2nodeclass.CapacityReservationStatus:
        return ec2nodeclass.CapacityReservationStatus(
            id=cr_id, availability_zone=zone, instance_type=instance_type, owner_id="123456789012"
        )

    found = (
        cr("cr-1", "us-east-1a"),
        cr("cr-2", "us-east-1b"),
        cr("cr-3", "us-east-1a", "c5.large"),
        cr("cr-4", "us-east-1f"),  # a zone without a node class subnet
    )
    unavailable = cache.UnavailableOfferings(clock=lambda: 0.0)
    unavailable.mark("m5.large", "us-east-1b", "cr-2")  # that reservation refused a launch
    zones = (("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"))
    offers = instancetypes.reserved_offerings(
        "m5.large", reservations=found, zones=zones, od_price=0.1, unavailable=unavailable
    )
    assert [(o.reservation_id, o.zone, o.zone_id, o.available) for o in offers] == [
        ("cr-1", "us-east-1a", "use1-az1", True),
        ("cr-2", "us-east-1b", "use1-az2", False),
    ]
    assert all(o.capacity_type == "reserved" and 0 < o.price < 0.1 / 1000 for o in offers)
    assert offers[0].labels()["karpenter.k8s.aws/capacity-reservation-id"] == "cr-1"
    # unpriced types cannot be ranked, reserved or not
    assert (
        instancetypes.reserved_offerings(
            "m5.large", reservations=found, zones=zones, od_price=None, unavailable=unavailable
        )
        == []
    )


def test_a_marked_reservation_stays_unavailable_until_a_describe_says_it_has_room_again() -> None:
    """Upstream `MarkUnavailable`: no 3-minute expiry, the next `AvailableInstanceCount` decides. Unknown
    reservations (no describe yet) are offered; the count is the offering's `reservation_capacity`."""
    now = [0.0]
    unavailable = cache.UnavailableOfferings(clock=lambda: now[0])
    assert not unavailable.is_unavailable("m5.large", "us-east-1a", "cr-1")
    assert unavailable.reservation_left("cr-1") is None
    unavailable.sync_reservations(reservations.available_counts([{"CapacityReservationId": "cr-1"}]))
    assert unavailable.reservation_left("cr-1") is None  # an answer without a count tells nothing
    unavailable.sync_reservations(
        reservations.available_counts([{"CapacityReservationId": "cr-1", "AvailableInstanceCount": 3}])
    )
    seq = unavailable.seq
    unavailable.mark("m5.large", "us-east-1a", "cr-1")  # interrupted, or refused a launch
    assert unavailable.seq != seq
    now[0] += 10 * cache.UNAVAILABLE_OFFERINGS_TTL
    unavailable.expire()
    assert unavailable.is_unavailable("m5.large", "us-east-1a", "cr-1")
    assert unavailable.is_unavailable("c5.large", "us-east-1b", "cr-1")  # the reservation, whatever is asked
    unavailable.reservation_launched("cr-1")  # never below zero
    assert unavailable.reservation_left("cr-1") == 0
    unavailable.sync_reservations({"cr-1": 2})
    assert not unavailable.is_unavailable("m5.large", "us-east-1a", "cr-1")
    found = (
        ec2nodeclass.CapacityReservationStatus(
            id="cr-1", availability_zone="us-east-1a", instance_type="m5.large", owner_id="123456789012"
        ),
    )
    (offer,) = instancetypes.reserved_offerings(
        "m5.large", reservations=found, zones=(("us-east-1a", "use1-az1"),), od_price=0.1, unavailable=unavailable
    )
    assert (offer.available, offer.reservation_capacity) == (True, 2)
