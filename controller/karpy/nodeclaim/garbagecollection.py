"""Garbage collection in both directions, as pure set logic.

* Instances the cloud lists that no NodeClaim points at (by provider id) for longer than `INSTANCE_GRACE` are
  leaked (a crash between `cloud.create` and the status write, a NodeClaim force-deleted without its finalizer):
  terminate them (aws: pkg/controllers/nodeclaim/garbagecollection). The grace protects a launch in flight.
* Registered NodeClaims whose instance the cloud no longer lists have lost their machine (terminated outside
  Karpenter): delete the claim (core: pkg/controllers/nodeclaim/garbagecollection). Claims not yet Registered
  are left to liveness, and claims already deleting to their finalizer.

Never on the strength of what could not be read: a NodeClaim that does not parse (a field the API server took
that karpy cannot read) still holds its instance -- by the provider id in its status, read leniently, or by the
`karpenter.sh/nodeclaim` tag the launch put on the instance -- and is itself never deleted here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from karpy.api import nodeclaim

INSTANCE_GRACE: Final = 30.0
"""Seconds an unclaimed instance is tolerated before it is terminated (upstream: 30 s)."""
NODECLAIM_INTERVAL: Final = 120.0
"""How often NodeClaims are checked against the cloud (upstream: 2 min)."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """What a NodeClaim that does not parse still tells, read leniently: which instance it holds."""

    name: str
    provider_id: str


def unreadable(raw: Mapping[str, Any]) -> Unreadable:
    """The lenient reading of a raw NodeClaim (never raises)."""
    meta, status = raw.get("metadata"), raw.get("status")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    provider_id = status.get("providerID") if isinstance(status, Mapping) else None
    return Unreadable(name if isinstance(name, str) else "", provider_id if isinstance(provider_id, str) else "")


def _held(claims: Iterable[nodeclaim.NodeClaim], unread: Iterable[Unreadable]) -> tuple[set[str], set[str]]:
    """(provider ids claimed, NodeClaim names that hold an instance by its tag) of parsed and unparsed claims."""
    unread = list(unread)
    claimed = {c.status.provider_id for c in claims if c.status.provider_id}
    claimed |= {u.provider_id for u in unread if u.provider_id}
    return claimed, {u.name for u in unread if u.name}


def leaked_instances(
    instances: Iterable[nodeclaim.NodeClaim],
    claims: Iterable[nodeclaim.NodeClaim],
    *,
    first_seen: Mapping[str, float],
    now: float,
    unread: Iterable[Unreadable] = (),
) -> list[nodeclaim.NodeClaim]:
    """Instances with no NodeClaim whose provider id has been seen unclaimed for more than `INSTANCE_GRACE`.

    `first_seen` maps provider id -> when the instance was first observed (the instance's own creation time when
    the provider knows it); an id missing from it has just been seen and is not yet leaked. `unread` are the
    NodeClaims that do not parse: their instances are held too.
    """
    claimed, holders = _held(claims, unread)
    out = []
    for instance in instances:
        pid = instance.status.provider_id
        if not pid or pid in claimed or instance.metadata.name in holders:
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
    unread: Iterable[Unreadable] = (),
) -> dict[str, float]:
    """The next `first_seen`: unclaimed instances keep their first sighting, new ones start now, others drop."""
    claimed, holders = _held(claims, unread)
    out: dict[str, float] = {}
    for instance in instances:
        pid = instance.status.provider_id
        if pid and pid not in claimed and instance.metadata.name not in holders:
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
