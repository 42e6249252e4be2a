"""Interruption decisions per message kind (aws: pkg/controllers/interruption/controller.go), instance → NodeClaim
matching, rebalance opt-in."""

from __future__ import annotations

import pytest
from tests import builders

from karpy.api import ec2nodeclass, labels, meta, nodeclaim, parse
from karpy.cloudprovider import interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import cache, instancetypes
from karpy.interruption import handler

K = interruption.Kind
R = handler.Reason


def launched_claim(
    name: str, instance: str, *, node: str = "", pool: str = "default", deleting: bool = False, reservation: str = ""
) -> nodeclaim.NodeClaim:
    """An m5.large NodeClaim of `pool` on EC2 instance `instance` (none: not launched), spot unless `reservation`
    names a capacity reservation, registered as `node` if given."""
    capacity = {labels.LABEL_CAPACITY_TYPE: "spot"}
    if reservation:
        capacity = {labels.LABEL_CAPACITY_TYPE: "reserved", labels.LABEL_CAPACITY_RESERVATION_ID: reservation}
    offering = {labels.LABEL_INSTANCE_TYPE: "m5.large", labels.LABEL_ZONE: "us-east-1a", **capacity}
    body = builders.nodeclaim(
        name,
        pool=pool,
        uid=f"uid-{name}",
        labels=offering,
        provider_id=f"aws:///us-east-1a/{instance}" if instance else "",
        node_name=node,
    )
    return parse.nodeclaim(builders.deleting(body) if deleting else body)


CLAIMS = [
    launched_claim("a", "i-a", node="ip-10-0-0-1"),
    launched_claim("b", "i-b"),  # launched, no node yet
    launched_claim("gone", "i-gone", node="ip-10-0-0-9", deleting=True),
    launched_claim("optin", "i-optin", node="ip-10-0-0-2", pool="replace"),
    launched_claim("unlaunched", ""),
    launched_claim("reserved", "i-r", node="ip-10-0-0-3", reservation="cr-0a"),
]


def _targets() -> dict[str, handler.Target]:
    """Built in each test, not at import: mutation testing forks after the test modules were imported."""
    return handler.index_by_instance(CLAIMS)


POOLS = {"replace": {labels.ANNOTATION_REPLACE_ON_REBALANCE: "true"}, "default": {}}


@pytest.mark.parametrize(
    ("provider_id", "expected"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"),
        ("fake://zone-a/i-00000001", "i-00000001"),
        ("aws:///us-east-1a/i-1/", "i-1"),
        ("", ""),
        ("i-no-scheme", ""),
    ],
)
def test_instance_id(provider_id: str, expected: str) -> None:
    assert handler.instance_id(provider_id) == expected


def test_index_skips_unlaunched_claims() -> None:
    assert set(_targets()) == {"i-a", "i-b", "i-gone", "i-optin", "i-r"}
    assert _targets()["i-a"] == handler.Target(
        "a", "uid-a", "ip-10-0-0-1", "default", "m5.large", "us-east-1a", "spot", deleting=False
    )


@pytest.mark.parametrize(
    ("kind", "instance", "reasons", "delete", "marks"),
    [
        (K.SPOT_INTERRUPTION, "i-a", [R.SPOT_INTERRUPTED, R.TERMINATING_ON_INTERRUPTION], True, True),
        (K.SCHEDULED_CHANGE, "i-a", [R.INSTANCE_UNHEALTHY, R.TERMINATING_ON_INTERRUPTION], True, False),
        (K.INSTANCE_STOPPED, "i-a", [R.INSTANCE_STOPPING, R.TERMINATING_ON_INTERRUPTION], True, False),
        (K.INSTANCE_TERMINATED, "i-b", [R.INSTANCE_TERMINATING, R.TERMINATING_ON_INTERRUPTION], True, False),
        (  # no reservation label: nothing to mark
            K.CAPACITY_RESERVATION_INTERRUPTION,
            "i-a",
            [R.CAPACITY_RESERVATION_INTERRUPTED, R.TERMINATING_ON_INTERRUPTION],
            True,
            False,
        ),
        (K.REBALANCE_RECOMMENDATION, "i-a", [R.REBALANCE_RECOMMENDATION], False, False),  # event only
        (
            K.REBALANCE_RECOMMENDATION,
            "i-optin",
            [R.REBALANCE_RECOMMENDATION, R.TERMINATING_ON_INTERRUPTION],
            True,
            False,
        ),
        (K.SPOT_INTERRUPTION, "i-gone", [R.SPOT_INTERRUPTED], False, True),  # already deleting: not again
    ],
)
def test_decide(
    kind: interruption.Kind, instance: str, reasons: list[handler.Reason], delete: bool, marks: bool
) -> None:
    (decision,) = handler.decide(interruption.Message(kind, (instance,)), _targets(), pool_annotations=POOLS)
    assert decision.target == _targets()[instance]
    assert [n.reason for n in decision.notices] == reasons
    assert decision.delete is delete
    expected = handler.UnavailableOffering("m5.large", "us-east-1a", "spot") if marks else None
    assert decision.unavailable == expected


def test_unknown_instances_and_no_ops_decide_nothing() -> None:
    assert handler.decide(interruption.Message(K.SPOT_INTERRUPTION, ("i-not-ours",)), _targets()) == []
    assert handler.decide(interruption.Message(K.NO_OP, ("i-a",)), _targets()) == []


def test_health_event_covers_every_affected_instance() -> None:
    got = handler.decide(interruption.Message(K.SCHEDULED_CHANGE, ("i-a", "i-b", "i-x")), _targets())
    assert [d.target.nodeclaim for d in got] == ["a", "b"]
    assert all(d.delete for d in got)


@pytest.mark.parametrize(
    ("value", "replaces"),
    [("true", True), ("True", True), (" true ", True), ("false", False), ("yes", False), ("", False)],
)
def test_replace_on_rebalance_annotation(value: str, replaces: bool) -> None:
    assert handler.replaces_on_rebalance({labels.ANNOTATION_REPLACE_ON_REBALANCE: value}) is replaces


def test_event_message_names_the_object_kind() -> None:
    assert handler.TERMINATING.message.format(kind="Node") == "Interruption triggered termination for the Node"


def test_capacity_reservation_interruption_drains_and_marks_the_reservation_unavailable() -> None:
    (decision,) = handler.decide(interruption.Message(K.CAPACITY_RESERVATION_INTERRUPTION, ("i-r",)), _targets())
    assert _targets()["i-r"].reservation_id == "cr-0a"
    assert decision.delete
    assert [n.reason for n in decision.notices] == [R.CAPACITY_RESERVATION_INTERRUPTED, R.TERMINATING_ON_INTERRUPTION]
    # The pool is the reservation itself: another reservation of the type stays usable.
    assert decision.unavailable == handler.UnavailableOffering("m5.large", "us-east-1a", "cr-0a")

    # What the interruption loop does with it, on the AWS provider's unavailable-offerings cache.
    ice = cache.UnavailableOfferings(clock=lambda: 0.0)
    marker: cloudprovider_parts.OfferingMarker = ice
    marker.mark(decision.unavailable.instance_type, decision.unavailable.zone, decision.unavailable.capacity_type)
    reservations = tuple(
        ec2nodeclass.CapacityReservationStatus(
            id=cr, availability_zone="us-east-1a", instance_type="m5.large", owner_id="123456789012"
        )
        for cr in ("cr-0a", "cr-0b")
    )
    offers = instancetypes.reserved_offerings(
        "m5.large", reservations=reservations, zones=(("us-east-1a", "use1-az1"),), od_price=0.1, unavailable=ice
    )
    assert [(o.reservation_id, o.available) for o in offers] == [("cr-0a", False), ("cr-0b", True)]
    assert not ice.is_unavailable("m5.large", "us-east-1a", labels.CAPACITY_TYPE_ON_DEMAND)


def test_targets_carry_what_the_handler_reads_from_the_claim() -> None:
    assert _targets()["i-gone"].deleting is True
    assert _targets()["i-r"].reservation_id == "cr-0a"
    bare = nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(
            name="bare", annotations={labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: "2030-01-01T00:00:00Z"}
        ),
        spec=nodeclaim.NodeClaimSpec(node_class_ref=meta.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")),
        status=nodeclaim.NodeClaimStatus(provider_id="aws:///us-east-1a/i-bare"),
    )
    assert handler.target_of(bare) == handler.Target("bare", termination_time_set=True)


def test_an_unknown_instance_does_not_hide_the_known_ones_after_it() -> None:
    decisions = handler.decide(interruption.Message(K.SPOT_INTERRUPTION, ("i-unknown", "i-a", "i-b")), _targets())
    assert [d.target.nodeclaim for d in decisions] == ["a", "b"]


def test_a_rebalance_for_a_pool_without_annotations_is_an_event_only() -> None:
    targets = handler.index_by_instance([launched_claim("elsewhere", "i-e", pool="not-in-the-map")])
    (decision,) = handler.decide(
        interruption.Message(K.REBALANCE_RECOMMENDATION, ("i-e",)), targets, pool_annotations={}
    )
    assert decision.delete is False


def test_an_offering_is_marked_only_when_the_claim_names_both_type_and_zone() -> None:
    claim = launched_claim("typeless", "i-t")
    typeless = nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(
            name="typeless",
            labels={k: v for k, v in claim.metadata.labels.items() if k != labels.LABEL_INSTANCE_TYPE},
        ),
        spec=claim.spec,
        status=claim.status,
    )
    (decision,) = handler.decide(
        interruption.Message(K.SPOT_INTERRUPTION, ("i-t",)), handler.index_by_instance([typeless])
    )
    assert decision.delete is True
    assert decision.unavailable is None
