"""What the NodeClaim lifecycle tells (core: nodeclaim/lifecycle/events.go and metrics.go, nodeclaim/
garbagecollection/controller.go): its Warning Events about a claim and the metrics of the claims it deletes and
terminates. One `Observer` per reconciler owns the recorder and the metrics; the reconciler names what happened.
"""

from __future__ import annotations

from typing import Final

from karpy import events
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors as cloudprovider_errors

INSUFFICIENT_CAPACITY: Final = "insufficient_capacity"
NODECLASS_NOT_READY: Final = "nodeclass_not_ready"
"""Upstream's reason labels for a claim deleted because its launch failed (core: lifecycle/launch.go)."""
UNREGISTERED_TAINT_MISSING: Final = "UnregisteredTaintMissing"
UNREGISTERED_TAINT_MISSING_MESSAGE: Final = (
    f"Missing {labels.TAINT_UNREGISTERED_KEY} taint which prevents registration related race conditions on "
    "Karpenter-managed nodes"
)
"""The Warning a NodeClaim gets when its Node registered without the unregistered taint (core:
nodeclaim/lifecycle/events.go)."""


class Metrics(nodeclaim.Disruptions):
    """What the lifecycle counts, by name (core: nodeclaim/lifecycle/metrics.go); `disrupted` per claim it deleted:
    insufficient_capacity, nodeclass_not_ready, launch_timeout, registration_timeout. The operator's subclass binds
    each to its series (`karpy.runtime.metrics.lifecycle`); this one counts nothing."""

    def instance_terminated(self, nodepool: str, seconds: float) -> None:
        """Seconds since InstanceTerminating turned True, once the cloud no longer finds the instance (core:
        nodeclaim/lifecycle/controller.go, karpenter_nodeclaims_instance_termination_duration_seconds)."""

    def terminated(self, nodepool: str, seconds: float) -> None:
        """Seconds since the deletion request when the finalizer is released
        (karpenter_nodeclaims_termination_duration_seconds)."""


def launch_failure(error: cloudprovider_errors.CloudProviderError) -> str:
    """The Event reason of a launch the provider refused for now (core: lifecycle/launch.go)."""
    ice = isinstance(error, cloudprovider_errors.InsufficientCapacity)
    return "InsufficientCapacityError" if ice else "NodeClassNotReady"


def _pool(claim: nodeclaim.NodeClaim) -> str:
    return claim.metadata.labels.get(labels.LABEL_NODEPOOL, "")


class Observer:
    """The lifecycle's voice: each method one thing that happened to a claim, told as upstream tells it."""

    def __init__(self, recorder: events.Recorder, metrics: Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def launch_failed(self, claim: nodeclaim.NodeClaim, error: cloudprovider_errors.CloudProviderError) -> None:
        """The provider cannot launch it now (insufficient capacity, node class not ready): a Warning on the claim,
        which is deleted next."""
        message = f"NodeClaim {claim.name} event: {error}"
        self._recorder.record(nodeclaim.event_ref(claim), "Warning", launch_failure(error), message)

    def launch_deleted(self, claim: nodeclaim.NodeClaim, error: cloudprovider_errors.CloudProviderError) -> None:
        """The claim whose launch failed was deleted: counted disrupted under upstream's reason label."""
        ice = isinstance(error, cloudprovider_errors.InsufficientCapacity)
        self.disrupted(claim, INSUFFICIENT_CAPACITY if ice else NODECLASS_NOT_READY)

    def disrupted(self, claim: nodeclaim.NodeClaim, reason: str) -> None:
        """The lifecycle deleted the claim for `reason` (a launch failure or a liveness timeout)."""
        capacity_type = claim.metadata.labels.get(labels.LABEL_CAPACITY_TYPE, "")
        self._metrics.disrupted(reason, _pool(claim), capacity_type, termination_mode=nodeclaim.termination_mode(claim))

    def taint_missing(self, claim: nodeclaim.NodeClaim) -> None:
        """Its Node registered without the unregistered taint: registration stops (Registered=False)."""
        ref = nodeclaim.event_ref(claim)
        self._recorder.record(ref, "Warning", UNREGISTERED_TAINT_MISSING, UNREGISTERED_TAINT_MISSING_MESSAGE)

    def garbage_collected(self, claim: nodeclaim.NodeClaim) -> None:
        """A registered claim whose instance is gone was deleted."""
        ref = nodeclaim.event_ref(claim)
        self._recorder.record(ref, "Warning", "GarbageCollected", "Instance was terminated outside of karpy")

    def grace_period_expiring(self, claim: nodeclaim.NodeClaim, deadline: str) -> None:
        """A deleting claim with a terminationGracePeriod got its termination timestamp: pods go by `deadline`."""
        message = f"All pods will be deleted by {deadline}"
        self._recorder.record(nodeclaim.event_ref(claim), "Warning", "TerminationGracePeriodExpiring", message)

    def instance_terminated(self, claim: nodeclaim.NodeClaim, seconds: float) -> None:
        """The cloud no longer finds the instance, `seconds` after InstanceTerminating turned True."""
        self._metrics.instance_terminated(_pool(claim), seconds)

    def terminated(self, claim: nodeclaim.NodeClaim, seconds: float) -> None:
        """The finalizer was released, `seconds` after the deletion request."""
        self._metrics.terminated(_pool(claim), seconds)
