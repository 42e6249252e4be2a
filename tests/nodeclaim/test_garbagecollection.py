"""Set logic of garbage collection in both directions."""

from __future__ import annotations

import dataclasses

from tests.nodeclaim import builders as nodeclaim_builders

from karpy.api import nodeclaim
from karpy.nodeclaim import garbagecollection as nodeclaim_garbagecollection

T0 = nodeclaim_builders.T0


def _instance(pid: str, created: float | None = None) -> nodeclaim.NodeClaim:
    claim = nodeclaim_builders.claim(f"i-{pid[-4:]}")
    return dataclasses.replace(
        claim,
        metadata=dataclasses.replace(claim.metadata, creation_timestamp=created),
        status=nodeclaim.NodeClaimStatus(provider_id=pid),
    )


REGISTERED = [nodeclaim_builders.cond("Registered", "True", T0)]
NOT_REGISTERED = [nodeclaim_builders.cond("Registered", "Unknown", T0)]
LEAVING = {"deleted": nodeclaim_builders.ts(T0), "finalizers": ["karpenter.sh/termination"]}


def test_unclaimed_instance_is_leaked_only_after_the_grace() -> None:
    instances = [_instance("p-0001"), _instance("p-0002")]
    claims = [nodeclaim_builders.claim("a", provider_id="p-0001", conditions=REGISTERED)]
    seen = nodeclaim_garbagecollection.track_unclaimed(instances, claims, first_seen={}, now=T0)
    assert seen == {"p-0002": T0}  # the claimed one is not tracked
    assert nodeclaim_garbagecollection.leaked_instances(instances, claims, first_seen=seen, now=T0 + 30) == []
    seen = nodeclaim_garbagecollection.track_unclaimed(instances, claims, first_seen=seen, now=T0 + 31)
    assert seen == {"p-0002": T0}  # the first sighting is kept
    assert [
        i.status.provider_id
        for i in nodeclaim_garbagecollection.leaked_instances(instances, claims, first_seen=seen, now=T0 + 31)
    ] == ["p-0002"]


def test_instance_creation_time_counts_as_first_sighting() -> None:
    instances = [_instance("p-0003", created=T0 - 100)]
    seen = nodeclaim_garbagecollection.track_unclaimed(instances, [], first_seen={}, now=T0)
    assert [
        i.status.provider_id
        for i in nodeclaim_garbagecollection.leaked_instances(instances, [], first_seen=seen, now=T0)
    ] == ["p-0003"]


def test_instance_claimed_later_is_forgotten() -> None:
    instances = [_instance("p-0004")]
    seen = nodeclaim_garbagecollection.track_unclaimed(instances, [], first_seen={}, now=T0)
    seen = nodeclaim_garbagecollection.track_unclaimed(
        instances,
        [nodeclaim_builders.claim("late", provider_id="p-0004", conditions=NOT_REGISTERED)],
        first_seen=seen,
        now=T0 + 5,
    )
    assert seen == {}


def test_orphaned_claims_are_registered_not_deleting_and_missing_from_the_cloud() -> None:
    claims = [
        nodeclaim_builders.claim("gone", provider_id="p-0001", conditions=REGISTERED),
        nodeclaim_builders.claim("alive", provider_id="p-0002", conditions=REGISTERED),
        nodeclaim_builders.claim("young", provider_id="p-0003", conditions=NOT_REGISTERED),  # liveness owns it
        nodeclaim_builders.claim(
            "leaving", provider_id="p-0004", conditions=REGISTERED, **LEAVING
        ),  # its finalizer owns it
    ]
    instances = [_instance("p-0002")]
    assert [c.name for c in nodeclaim_garbagecollection.orphaned_claims(claims, instances)] == ["gone"]


def test_a_deleting_claim_still_claims_its_instance() -> None:
    """A claim being deleted is still draining its node: its instance is not leaked, however long ago it was first
    seen unclaimed (an instance the launch had not yet recorded when the GC first looked)."""
    instances = [_instance("p-0005")]
    draining = [nodeclaim_builders.claim("draining", provider_id="p-0005", conditions=REGISTERED, **LEAVING)]
    assert (
        nodeclaim_garbagecollection.track_unclaimed(instances, draining, first_seen={"p-0005": T0 - 3600}, now=T0) == {}
    )
    assert (
        nodeclaim_garbagecollection.leaked_instances(instances, draining, first_seen={"p-0005": T0 - 3600}, now=T0)
        == []
    )


def test_a_claimed_instance_is_never_leaked_even_with_a_stale_first_sighting() -> None:
    instances = [_instance("p-0006")]
    claims = [nodeclaim_builders.claim("late", provider_id="p-0006", conditions=NOT_REGISTERED)]
    assert (
        nodeclaim_garbagecollection.leaked_instances(instances, claims, first_seen={"p-0006": T0 - 3600}, now=T0) == []
    )


def test_an_instance_without_a_provider_id_is_never_leaked() -> None:
    bare = _instance("")
    assert nodeclaim_garbagecollection.track_unclaimed([bare], [], first_seen={}, now=T0) == {}
    assert nodeclaim_garbagecollection.leaked_instances([bare], [], first_seen={"": T0 - 3600}, now=T0) == []


def test_leaked_instances_and_orphaned_claims_come_in_a_stable_order() -> None:
    instances = [_instance("p-0009"), _instance("p-0008")]
    seen = {"p-0008": T0 - 60, "p-0009": T0 - 60}
    assert [
        i.status.provider_id
        for i in nodeclaim_garbagecollection.leaked_instances(instances, [], first_seen=seen, now=T0)
    ] == [
        "p-0008",
        "p-0009",
    ]
    claims = [
        nodeclaim_builders.claim("zulu", provider_id="p-0010", conditions=REGISTERED),
        nodeclaim_builders.claim("alpha", provider_id="p-0011", conditions=REGISTERED),
    ]
    assert [c.name for c in nodeclaim_garbagecollection.orphaned_claims(claims, [])] == ["alpha", "zulu"]
