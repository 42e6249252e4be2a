"""Forceful expiration (core: pkg/controllers/nodeclaim/expiration/controller.go), pure.

A NodeClaim older than `spec.expireAfter` is deleted at once: no disruption budget, no pre-spun replacement
(its pods go pending and the provisioner replaces the capacity). `expireAfter: Never` (None) never expires.
"""

from __future__ import annotations

from karpy.api import nodeclaim


def expires_at(claim: nodeclaim.NodeClaim) -> float | None:
    """creationTimestamp + expireAfter, None when it never expires (or has no creation time yet)."""
    created = claim.metadata.creation_timestamp
    if created is None or claim.spec.expire_after is None:
        return None
    return created + claim.spec.expire_after


def expired(claim: nodeclaim.NodeClaim, now: float) -> bool:
    """True once `now` reaches the expiry time of a claim that is not already being deleted."""
    when = expires_at(claim)
    return when is not None and claim.metadata.deletion_timestamp is None and now >= when
