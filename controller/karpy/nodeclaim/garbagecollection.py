"""Garbage collection in both directions, as pure set logic.

* Instances the cloud lists that no NodeClaim points at (by provider id) for longer than `INSTANCE_GRACE` are
  leaked (a crash between `cloud.create` and the status write, a NodeClaim force-deleted without its finalizer):
  terminate them (aws: pkg/controllers/nodeclaim/garbagecollection). The grace protects a launch in flight.
* Registered NodeClaims whose instance the cloud no longer lists have lost their machine (terminated outside
  Karpenter): delete the claim (core: pkg/controllers/nodeclaim/garbagecollection). Claims not yet Registered
  are left to liveness, and claims already deleting to their finalizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from karpy.api import nodeclaim

INSTANCE_GRACE: Final = 30.0
"""Seconds an unclaimed instance is tolerated before it is terminated (upstream: 30 s)."""
NODECLAIM_INTERVAL: Final = 120.0
"""How often NodeClaims are checked against the cloud (upstream: 2 min)."""


def leaked_instances(
    instances: Iterable[nodeclaim.NodeClaim],
    claims: Iterable[nodeclaim.NodeClaim],
    *,
    first_seen: Mapping[str, float],
    now: float,
) -> list[nodeclaim.NodeClaim]:
    """Instances with no NodeClaim whose provider id has been seen unclaimed for more than `INSTANCE_GRACE`.

    `first_seen` maps provider id -> when the instance was first observed (the instance's own creation time when
    the provider knows it); an id missing from it has just been seen and is not yet leaked.
    """
    claimed = {c.status.provider_id for c in claims if c.status.provider_id}
    out = []
    for instance in instances:
        pid = instance.status.provider_id
        if not pid or pid in claimed:
            continue
        seen = first_seen.get(pid)
        if seen is not None and now - seen > INSTANCE_GRACE:
            out.append(instance)
    return sorted(out, key=lambda i: i.status.provider_id)


def track_unclaimed(
    instances: Iterable[nodeclaim.NodeClaim],
    claims: Iterable[nodeclaim.NodeClaim],
    *,
    first_seen: Mapping[str, float],
    now: float,
) -> dict[str, float]:
    """The next `first_seen`: unclaimed instances keep their first sighting, new ones start now, others drop."""
    claimed = {c.status.provider_id for c in claims if c.status.provider_id}
    out: dict[str, float] = {}
    for instance in instances:
        pid = instance.status.provider_id
        if pid and pid not in claimed:
            created = instance.metadata.creation_timestamp
            out[pid] = first_seen.get(pid, created if created is not None else now)
    return out


def orphaned_claims(
    claims: Iterable[nodeclaim.NodeClaim], instances: Iterable[nodeclaim.NodeClaim]
) -> list[nodeclaim.NodeClaim]:
    """Registered, not-deleting NodeClaims whose provider id the cloud no longer lists."""
    live = {i.status.provider_id for i in instances}
    return sorted(
        (
            c
            for c in claims
            if c.is_true(nodeclaim.REGISTERED)
            and c.metadata.deletion_timestamp is None
            and c.status.provider_id
            and c.status.provider_id not in live
        ),
        key=lambda c: c.name,
    )
