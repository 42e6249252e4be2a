"""The EC2NodeClass status and finalizer controller (aws: pkg/controllers/nodeclass): resolves the class's subnets,
security groups, AMIs and instance profile through the cloud provider, stamps its drift hash, and holds
`karpenter.k8s.aws/termination` until no NodeClaim uses it. A thin async shell: the cloud provider resolves, the
patches are built in `karpy.nodepool.drift_hash` and `karpy.kube.patches`.

Must not import the AWS provider: it reaches the cloud through the `cloudprovider.parts.NodeClassReconciler` protocol.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy import events
from karpy.api import ec2nodeclass, errors, hashing, labels, nodeclaim, nodepool, parse, status
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.kube import client as kube_client
from karpy.kube import patches, resources
from karpy.nodepool import drift_hash
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)


def nodeclass_stamp(nc: ec2nodeclass.EC2NodeClass) -> drift_hash.HashStamp:
    return drift_hash.HashStamp(
        labels.ANNOTATION_EC2NODECLASS_HASH,
        labels.ANNOTATION_EC2NODECLASS_HASH_VERSION,
        labels.EC2NODECLASS_HASH_VERSION,
        hashing.ec2nodeclass_hash(nc),
    )


def nodeclass_in_use(name: str, pools: Sequence[nodepool.NodePool]) -> list[str]:
    """NodePools still referring to the EC2NodeClass (it waits for them before cleaning up, as upstream)."""
    return sorted(p.name for p in pools if p.template.node_class_ref.name == name)


NODECLASS_RESYNC: Final = 60.0
"""Seconds between re-resolutions of an EC2NodeClass (subnets, AMIs, ... change outside Kubernetes): upstream's
1-minute refresh. The AWS resolver caches each lookup for the same minute, so a refresh is one describe round per
selector, and a reconcile triggered in between (by the class's own writes) describes nothing."""


NODECLASS_ERROR_RETRY: Final = 30.0


NODECLASS_IN_USE_POLL: Final = 10.0
WAITING_EVENT_PERIOD: Final = 600.0
"""Seconds between two WaitingOnNodeClaimTermination events about one class (upstream re-fires it every 10 min)."""
WAITING_ON_NODECLAIM_TERMINATION: Final = "WaitingOnNodeClaimTermination"


def waiting_message(names: Sequence[str], *, shown: int = 5) -> str:
    """aws: nodeclass/events.go, with its names as utils.PrettySlice lists them (five, then "and N other(s)")."""
    listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} other(s)" if len(names) > shown else "")
    return f"Waiting on NodeClaim termination for {listed}"


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The EC2NodeClass reconciler's collaborators: it resolves through `NodeClassReconciler`, not the CloudProvider."""

    client: kube_client.KubeClient
    cluster: state_cluster.Cluster
    cloud: cloudprovider_parts.NodeClassReconciler
    clock: karpy_clock.Clock
    recorder: events.Recorder
    """Where WaitingOnNodeClaimTermination goes while a deleted class still has NodeClaims."""


class NodeClassController:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        """Class uid -> when it was last told it waits on its NodeClaims."""

    async def reconcile(self, name: str) -> float | None:
        kube = self._deps.client
        raw = await kube.get(resources.EC2NODECLASSES, name)
        if raw is None:
            return None
        try:
            nc = parse.ec2nodeclass(raw)
        except errors.ValidationError as invalid:
            summary = invalid.summary()
            log.error("ec2nodeclass failed validation: %s", summary, extra={"ec2nodeclass": name, "error": summary})
            return None
        if nc.metadata.deletion_timestamp is not None:
            return await self._finalize(raw, nc)
        add = patches.finalizers_patch(raw, add=labels.FINALIZER_AWS_TERMINATION)
        if add is not None:
            raw = await kube.patch(resources.EC2NODECLASSES, name, add)
        stamp = nodeclass_stamp(nc)
        await drift_hash.restamp(kube, [c for c in self._deps.cluster.nodeclaims() if _of_class(c, nc)], stamp)
        annotations = drift_hash.hash_patch(nc.metadata, stamp)
        if annotations is not None:
            await kube.patch(resources.EC2NODECLASSES, name, annotations)
        try:
            resolved = await self._deps.cloud.reconcile_nodeclass(nc)
        except cloudprovider_errors.CloudProviderError as error:
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
            dedupe = events.about(raw, timeout=WAITING_EVENT_PERIOD)
            message = waiting_message(using)
            self._deps.recorder.record(raw, "Normal", WAITING_ON_NODECLAIM_TERMINATION, message, dedupe=dedupe)
            return NODECLASS_IN_USE_POLL
        try:
            await self._deps.cloud.finalize_nodeclass(nc)
        except cloudprovider_errors.CloudProviderError as error:
            log.warning("finalizing ec2nodeclass failed: %s", error, extra={"ec2nodeclass": nc.name})
            return NODECLASS_ERROR_RETRY
        remove = patches.finalizers_patch(raw, remove=labels.FINALIZER_AWS_TERMINATION)
        if remove is not None:
            await self._deps.client.patch(resources.EC2NODECLASSES, nc.name, remove)
        return None


def _of_class(claim: nodeclaim.NodeClaim, nc: ec2nodeclass.EC2NodeClass) -> bool:
    ref = claim.spec.node_class_ref
    return ref.name == nc.name and ref.kind == "EC2NodeClass" and ref.group == labels.AWS_GROUP


def _status_of(raw: Mapping[str, Any]) -> Any:
    return raw.get("status") or {}
