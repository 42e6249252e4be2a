"""The NodePool status/hash controller and the EC2NodeClass status/finalizer controller: thin async shells that
read the object from the API server, compute patches with `poolstatus` (pure) and apply them.

No reconciler package owns these two (they are small and mostly status bookkeeping); they depend only on the
KubeClient, the state cache and the node-class part of the cloud provider.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from karpy import clock as clock_module
from karpy.api import ec2nodeclass, errors, labels, meta, nodeclaim, nodepool, parse, status
from karpy.cloudprovider import errors as cloud_errors
from karpy.kube import client, resources
from karpy.nodeclaim import registration as registration_health
from karpy.operator import poolstatus
from karpy.state import cluster as cluster_module

log = logging.getLogger(__name__)

NODEPOOL_RESYNC: Final = 60.0
"""Seconds between status refreshes of a NodePool with no event (usage also moves with its NodeClaims)."""
NODECLASS_RESYNC: Final = 60.0
"""Seconds between re-resolutions of an EC2NodeClass (subnets, AMIs, ... change outside Kubernetes): upstream's
1-minute refresh. The AWS resolver caches each lookup for the same minute, so a refresh is one describe round per
selector, and a reconcile triggered in between (by the class's own writes) describes nothing."""
NODECLASS_ERROR_RETRY: Final = 30.0
NODECLASS_IN_USE_POLL: Final = 10.0


class NodeClassReconciler(Protocol):
    """The node-class half of a cloud provider (AWSCloudProvider has it; a fake can)."""

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus: ...

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None: ...


class NodePoolController:
    def __init__(
        self,
        kube: client.KubeClient,
        cluster: cluster_module.Cluster,
        *,
        clock: clock_module.Clock,
        registration: registration_health.RegistrationHealth | None = None,
    ) -> None:
        self._kube = kube
        self._cluster = cluster
        self._clock = clock
        self._registration = registration

    def _registration_condition(
        self, raw: Mapping[str, Any], pool: nodepool.NodePool | None
    ) -> tuple[str, str, str] | None:
        """NodeRegistrationHealthy as the registration tracker decides it (None: not tracked, or no valid pool)."""
        if self._registration is None or pool is None or not pool.metadata.uid:
            return None
        nc = self._cluster.nodeclasses().get(pool.template.node_class_ref.name)
        if nc is None:
            return None  # upstream leaves the condition alone while the node class is missing
        previous = meta.condition(poolstatus.observed_conditions(raw), poolstatus.NODE_REGISTRATION_HEALTHY)
        observed = (raw.get("status") or {}).get("nodeClassObservedGeneration")
        stale = previous is not None and (
            previous.observed_generation != pool.metadata.generation
            or (observed is not None and observed != nc.metadata.generation)
        )
        wanted = self._registration.condition(pool.metadata.uid, previous, stale=stale)
        return wanted.status, wanted.reason, wanted.message

    async def reconcile(self, name: str) -> float | None:
        raw = await self._kube.get(resources.NODEPOOLS, name)
        if raw is None:
            return None
        try:
            pool, error = parse.nodepool(raw), ""
        except errors.ValidationError as invalid:
            pool, error = None, _problems(invalid)
            log.error("nodepool failed validation", extra={"nodepool": name, "error": error})
        if pool is not None and pool.metadata.deletion_timestamp is None:
            stamp = poolstatus.nodepool_stamp(pool)
            claims = [c for c in self._cluster.nodeclaims() if c.metadata.labels.get(labels.LABEL_NODEPOOL) == name]
            await restamp(self._kube, claims, stamp)
            annotations = poolstatus.hash_patch(pool.metadata, stamp)
            if annotations is not None:
                raw = await self._kube.patch(resources.NODEPOOLS, name, annotations)
        patch = poolstatus.nodepool_status_patch(
            raw,
            pool=pool,
            validation_error=error,
            nodeclasses=self._cluster.nodeclasses(),
            usage=self._cluster.nodepool_usage(name),
            now=self._clock.now(),
            registration=self._registration_condition(raw, pool),
        )
        if patch is not None:
            await self._kube.patch(resources.NODEPOOLS, name, patch, subresource="status")
        return NODEPOOL_RESYNC


@dataclasses.dataclass(frozen=True, slots=True)
class NodeClassDeps:
    kube: client.KubeClient
    cluster: cluster_module.Cluster
    cloud: NodeClassReconciler
    clock: clock_module.Clock


class NodeClassController:
    def __init__(self, deps: NodeClassDeps) -> None:
        self._deps = deps

    async def reconcile(self, name: str) -> float | None:
        kube = self._deps.kube
        raw = await kube.get(resources.EC2NODECLASSES, name)
        if raw is None:
            return None
        try:
            nc = parse.ec2nodeclass(raw)
        except errors.ValidationError as invalid:
            log.error("ec2nodeclass failed validation", extra={"ec2nodeclass": name, "error": _problems(invalid)})
            return None
        if nc.metadata.deletion_timestamp is not None:
            return await self._finalize(raw, nc)
        add = poolstatus.finalizers_patch(raw, add=labels.FINALIZER_AWS_TERMINATION)
        if add is not None:
            raw = await kube.patch(resources.EC2NODECLASSES, name, add)
        stamp = poolstatus.nodeclass_stamp(nc)
        await restamp(kube, [c for c in self._deps.cluster.nodeclaims() if _of_class(c, nc)], stamp)
        annotations = poolstatus.hash_patch(nc.metadata, stamp)
        if annotations is not None:
            await kube.patch(resources.EC2NODECLASSES, name, annotations)
        try:
            resolved = await self._deps.cloud.reconcile_nodeclass(nc)
        except cloud_errors.CloudProviderError as error:
            log.warning("resolving ec2nodeclass failed: %s", error, extra={"ec2nodeclass": name})
            return NODECLASS_ERROR_RETRY
        body = status.to_status(dataclasses.replace(nc, status=resolved))
        if body != _status_of(raw):
            await kube.patch(resources.EC2NODECLASSES, name, {"status": body}, subresource="status")
        return NODECLASS_RESYNC

    async def _finalize(self, raw: Mapping[str, Any], nc: ec2nodeclass.EC2NodeClass) -> float | None:
        if labels.FINALIZER_AWS_TERMINATION not in nc.metadata.finalizers:
            return None
        using = sorted(c.name for c in self._deps.cluster.nodeclaims() if c.spec.node_class_ref.name == nc.name)
        if using:  # upstream waits for every NodeClaim of the class before cleaning up its launch templates
            log.info("waiting on nodeclaims to terminate", extra={"ec2nodeclass": nc.name, "nodeclaims": using[:10]})
            return NODECLASS_IN_USE_POLL
        try:
            await self._deps.cloud.finalize_nodeclass(nc)
        except cloud_errors.CloudProviderError as error:
            log.warning("finalizing ec2nodeclass failed: %s", error, extra={"ec2nodeclass": nc.name})
            return NODECLASS_ERROR_RETRY
        remove = poolstatus.finalizers_patch(raw, remove=labels.FINALIZER_AWS_TERMINATION)
        if remove is not None:
            await self._deps.kube.patch(resources.EC2NODECLASSES, nc.name, remove)
        return None


async def restamp(kube: client.KubeClient, claims: Iterable[nodeclaim.NodeClaim], stamp: poolstatus.HashStamp) -> None:
    """Re-stamp the claims whose hash has another version, before the owner is stamped (as upstream orders it, so
    a failure leaves the owner to be retried). Every reconcile looks, not only when the owner's own version
    changes: a claim another controller stamped later is caught too."""
    for claim in claims:
        patch = poolstatus.restamp_patch(claim, stamp)
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


def _of_class(claim: nodeclaim.NodeClaim, nc: ec2nodeclass.EC2NodeClass) -> bool:
    ref = claim.spec.node_class_ref
    return ref.name == nc.name and ref.kind == "EC2NodeClass" and ref.group == labels.AWS_GROUP


def _problems(invalid: errors.ValidationError) -> str:
    return "; ".join(f"{p.path}: {p.message}" for p in invalid.problems) or str(invalid)


def _status_of(raw: Mapping[str, Any]) -> Any:
    return raw.get("status") or {}
