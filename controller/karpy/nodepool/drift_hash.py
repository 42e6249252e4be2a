"""The drift hash of the owners of NodeClaims (core: pkg/controllers/nodepool/hash/controller.go, aws:
pkg/controllers/nodeclass/hash/controller.go): the annotations that stamp a NodePool or EC2NodeClass with its hash,
and re-stamp its NodeClaims when karpy's hash version changed. Pure but for `restamp`, which applies the patches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from karpy.api import hashing, labels, meta, nodeclaim, nodepool
from karpy.kube import client, resources

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HashStamp:
    """The drift hash of one owner of NodeClaims (a NodePool or an EC2NodeClass): the annotation keys it is written
    under, karpy's hash version and the owner's hash now."""

    hash_key: str
    version_key: str
    version: str
    value: str

    def annotations(self) -> dict[str, str]:
        return {self.hash_key: self.value, self.version_key: self.version}


def nodepool_stamp(pool: nodepool.NodePool) -> HashStamp:
    return HashStamp(
        labels.ANNOTATION_NODEPOOL_HASH,
        labels.ANNOTATION_NODEPOOL_HASH_VERSION,
        labels.NODEPOOL_HASH_VERSION,
        hashing.nodepool_hash(pool),
    )


def hash_patch(owner: meta.ObjectMeta, stamp: HashStamp) -> dict[str, Any] | None:
    """The annotations that record the owner's hash (upstream's nodepool and nodeclass hash controllers), or None
    when it carries them already."""
    wanted = stamp.annotations()
    if all(owner.annotations.get(k) == v for k, v in wanted.items()):
        return None
    return {"metadata": {"annotations": wanted}}


def restamp_patch(claim: nodeclaim.NodeClaim, stamp: HashStamp) -> dict[str, Any] | None:
    """The annotations that re-stamp a claim whose hash carries another version (upstream's, after a take-over, or
    an older karpy's), or None when it carries ours.

    A hash of another version cannot be compared with ours, so it says nothing about drift: the claim gets our
    version and the owner's hash now, as upstream's hash controllers do on a version change (core:
    pkg/controllers/nodepool/hash/controller.go updateNodeClaimHash). A claim already Drifted keeps its old hash
    under the new version, so it stays drifted: whether it still is cannot be told across hash versions."""
    if claim.metadata.annotations.get(stamp.version_key) == stamp.version:
        return None
    wanted = {stamp.version_key: stamp.version}
    if claim.condition(nodeclaim.DRIFTED) is None:
        wanted[stamp.hash_key] = stamp.value
    return {"metadata": {"annotations": wanted}}


async def restamp(kube: client.KubeClient, claims: Iterable[nodeclaim.NodeClaim], stamp: HashStamp) -> None:
    """Re-stamp the claims whose hash has another version, before the owner is stamped (as upstream orders it, so
    a failure leaves the owner to be retried). Every reconcile looks, not only when the owner's own version
    changes: a claim another controller stamped later is caught too."""
    for claim in claims:
        patch = restamp_patch(claim, stamp)
        if patch is None:
            continue
        log.info(
            "re-stamping nodeclaim drift hash",
            extra={"nodeclaim": claim.name, "annotation": stamp.version_key, "version": stamp.version},
        )
        try:
            await kube.patch(resources.NODECLAIMS, claim.name, patch)
        except client.NotFound:
            continue
