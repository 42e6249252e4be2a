"""Everything a cloud provider gives the controller, as one value built once by its factory (`CloudParts`), and
the structural seams of its optional parts: the node-class half, the interruption queue, the unavailable-offerings
marker, the zonal-shift reader and the count of API calls.

The AWS factory (`karpy.cloudprovider.aws.factory.build`) returns it, tests build it around the fake provider, and
the object graph (`karpy.wiring.graph`) only wraps it: in a dry run (`karpy.cloudprovider.dryrun.wrap`), with the
NodeOverlays, with the kube-dns discovery. The reconcilers take the protocols; nothing here imports AWS code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from karpy.api import ec2nodeclass
from karpy.cloudprovider import interruption, overlay, types


class NodeClassReconciler(Protocol):
    """The node-class half of a cloud provider (AWSCloudProvider has it; a fake can)."""

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus: ...

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None: ...


class QueueClient(Protocol):
    """An interruption source: `karpy.cloudprovider.aws.interruption_queue.InterruptionQueue` (SQS) and the
    DescribeInstanceStatus poller have this shape."""

    async def receive(self, *, wait_seconds: int = ...) -> Sequence[interruption.Received | interruption.Unreadable]:
        """Long-poll once and return the messages (up to 10): parsed, or unreadable for the caller to drop."""
        ...

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        """Remove a handled (or poison) message from the queue."""
        ...


class OfferingMarker(Protocol):
    """The shape of the AWS provider's unavailable-offerings cache (`AWSCloudProvider.unavailable.mark`)."""

    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Stop offering (instance type, zone, capacity pool) for a while (upstream: 3 min ICE cache). The pool is
        the capacity type (spot, on-demand), or a capacity reservation's id for reserved capacity: each
        reservation is its own pool."""
        ...


class ShiftSource(Protocol):
    """The cluster's ARC zonal shifts (`karpy.cloudprovider.aws.zonalshift.ZonalShifts`)."""

    async def update(self) -> None:
        """Read the cluster's shifts now; raises when they cannot be read."""
        ...

    def shifted_zones(self) -> frozenset[str]:
        """The zone ids shifted away from now, as of the last `update`."""
        ...


class HistogramSnapshot(Protocol):
    @property
    def buckets(self) -> tuple[tuple[float, int], ...]:
        """(upper bound, cumulative count), +Inf last."""
        ...

    @property
    def total(self) -> float: ...

    @property
    def count(self) -> int: ...


class BatchSnapshot(Protocol):
    @property
    def sizes(self) -> HistogramSnapshot: ...

    @property
    def window_seconds(self) -> HistogramSnapshot: ...


class CloudCalls(Protocol):
    """The cloud provider's count of its API calls (karpy.cloudprovider.aws.accounting.ApiCalls)."""

    def calls(self) -> Mapping[tuple[str, str], int]: ...
    def attempts(self) -> Mapping[tuple[str, str], int]: ...
    def errors(self) -> Mapping[tuple[str, str, str], int]: ...
    def batches(self) -> Mapping[str, BatchSnapshot]: ...
    def launch_failures(self) -> Mapping[tuple[str, str, str, str], int]: ...
    def termination_failures(self) -> Mapping[tuple[str, str], int]: ...
    def userdata_bytes(self) -> Mapping[str, int]: ...


Loop = Callable[[], Coroutine[Any, Any, None]]


@dataclasses.dataclass(frozen=True, slots=True)
class CloudParts:
    provider: types.CloudProvider
    nodeclasses: NodeClassReconciler | None = None
    """EC2NodeClass status/finalizer support; None disables that controller."""
    queue: QueueClient | None = None
    """The interruption queue; None when INTERRUPTION_QUEUE is empty."""
    offerings: OfferingMarker | None = None
    instance_status: QueueClient | None = None
    """Instance health (DescribeInstanceStatus) as an interruption source; None when the cloud has none."""
    janitor: Loop | None = None
    """Deletes launch templates unused for a minute (upstream: on cache eviction); leader only, never in a dry run."""
    tagger: Loop | None = None
    """Tags instances with their node's and NodeClaim's names once registered; leader only, never in a dry run."""
    api_calls: CloudCalls | None = None
    """The provider's count of its API calls, exposed as metrics; None when it keeps none (the fake)."""
    use_overlays: Callable[[overlay.Overlays], None] | None = None
    """Has the provider's launches apply the NodeOverlays (NodeOverlay gate); None: they see the list prices."""
    use_kube_dns: Callable[[str], None] | None = None
    """Tells the provider the kube-dns Service's address discovered at start, nodes' default cluster DNS; None: the
    provider needs none, and nothing is read (`karpy.wiring.startup`)."""
    zonal_shifts: ShiftSource | None = None
    """The cluster's ARC zonal shifts for the NodePool events loop; None when not followed (ENABLE_ZONAL_SHIFT)."""
    check: Loop | None = None
    """Start-up checks of the cloud side, awaited before anything runs; raise
    `cloudprovider.errors.StartupCheckFailed` to stop start-up."""
    reachable: Callable[[], Coroutine[Any, Any, str | None]] | None = None
    """Whether the cloud answers this identity (None) or why not (the reason), checked once before anything runs:
    a reason stops start-up, as upstream does (`karpy.operator.app.check_cloud`). None: nothing to check (the fake)."""
