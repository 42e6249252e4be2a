"""The shape of a running controller's object graph: `Controller` (everything `app.run` starts), the cloud provider's
parts, the loop timings and the names of the per-object work queues. `karpy.wiring.graph.build` fills it in; the
runtime (`routing`, `leadership`) and the process run it. Construction happens elsewhere: no logic here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy import settings as karpy_settings
from karpy.cloudprovider import overlay, types
from karpy.disruption import controller as disruption_controller
from karpy.disruption import staticpools
from karpy.disruption import validation as disruption_validation
from karpy.interruption import controller as interruption_controller
from karpy.interruption import queue as interruption_queue
from karpy.kube import client
from karpy.nodeclaim import conditions_controller, consistency, expiration, repair
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclass import controller as nodeclass_controller
from karpy.nodepool import controller as nodepool_controller
from karpy.nodepool import zonalshift
from karpy.provisioning import provisioner
from karpy.runtime import lease, metrics, workqueue
from karpy.runtime.metrics import cloudprovider as metrics_cloudprovider
from karpy.state import cluster as state_cluster
from karpy.termination import controller as termination_controller


@dataclasses.dataclass(frozen=True, slots=True)
class CloudParts:
    provider: types.CloudProvider
    nodeclasses: nodeclass_controller.NodeClassReconciler | None = None
    """EC2NodeClass status/finalizer support; None disables that controller."""
    queue: interruption_queue.QueueClient | None = None
    """The interruption queue; None when INTERRUPTION_QUEUE is empty."""
    offerings: interruption_queue.OfferingMarker | None = None
    instance_status: interruption_queue.QueueClient | None = None
    """Instance health (DescribeInstanceStatus) as an interruption source; None when the cloud has none."""
    janitor: Callable[[], Coroutine[Any, Any, None]] | None = None
    """Deletes launch templates unused for a minute (upstream: on cache eviction); leader only, never in a dry run."""
    tagger: Callable[[], Coroutine[Any, Any, None]] | None = None
    """Tags instances with their node's and NodeClaim's names once registered; leader only, never in a dry run."""
    api_calls: metrics_cloudprovider.CloudCalls | None = None
    """The provider's count of its API calls, exposed as metrics; None when it keeps none (the fake)."""
    use_overlays: Callable[[overlay.Overlays], None] | None = None
    """Has the provider's launches apply the NodeOverlays (NodeOverlay gate); None: they see the list prices."""
    use_kube_dns: Callable[[str], None] | None = None
    """Tells the provider the kube-dns Service's address discovered at start, nodes' default cluster DNS; None: the
    provider needs none, and nothing is read (`karpy.wiring.startup`)."""
    zonal_shifts: zonalshift.ShiftSource | None = None
    """The cluster's ARC zonal shifts for the NodePool events loop; None when not followed (ENABLE_ZONAL_SHIFT)."""
    check: Callable[[], Coroutine[Any, Any, None]] | None = None
    """Start-up checks of the cloud side, awaited before anything runs; raise
    `cloudprovider.errors.StartupCheckFailed` to stop start-up."""
    reachable: Callable[[], Coroutine[Any, Any, str | None]] | None = None
    """Whether the cloud answers this identity (None) or why not (the reason), checked once before anything runs:
    a reason stops start-up, as upstream does (`karpy.operator.app.check_cloud`). None: nothing to check (the fake)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Timings:
    """Loop timings that upstream hard-codes (no setting, no env var): `karpy run` always uses the defaults; the
    emulation's demo and wall-clock tests shorten them so that a scenario takes seconds, not minutes."""

    disruption_poll: float = disruption_controller.POLL
    """Seconds between disruption passes that found nothing to do (upstream 10 s)."""
    validation_delay: float = disruption_validation.VALIDATION_DELAY
    """Seconds a consolidation command waits before it is validated again (upstream 15 s)."""


CloudFactory = Callable[[karpy_settings.Settings, state_cluster.Cluster, karpy_clock.Clock], CloudParts]


@dataclasses.dataclass(slots=True)
class Controller:
    """Everything `app.run` starts. `queues` hold per-object work fed by the state cache's listener (`routing`)."""

    settings: karpy_settings.Settings
    kube: client.KubeClient
    cluster: state_cluster.Cluster
    cloud: CloudParts
    recorder: events.KubeRecorder
    rejections: rejections.Rejections
    metrics: metrics.Metrics
    elector: lease.LeaderElector | lease.AlwaysLeader
    clock: karpy_clock.Clock
    nodeclaims: nodeclaim_controller.NodeClaimController
    termination: termination_controller.TerminationController
    provisioner: provisioner.Provisioner
    disruption: disruption_controller.DisruptionController
    interruption: interruption_controller.InterruptionController | None
    nodepools: nodepool_controller.NodePoolController
    nodeclasses: nodeclass_controller.NodeClassController | None
    nodeclaim_conditions: conditions_controller.NodeClaimConditionsController
    """Consolidatable / Drifted conditions (fed pod events by a Cluster listener)."""
    expiration: expiration.ExpirationController
    """Deletes NodeClaims at creation + expireAfter."""
    consistency: consistency.ConsistencyController
    """Checks each registered node's shape against its NodeClaim every 10 minutes (ConsistentStateFound)."""
    instance_status: interruption_controller.InterruptionController | None = None
    """The interruption loop over instance health (impaired checks, scheduled events); None without a source."""
    repair: repair.RepairController | None = None
    """Replaces unhealthy nodes; None unless the NodeRepair gate is on and the provider has repair policies."""
    static_pools: staticpools.StaticPoolController | None = None
    """Keeps static NodePools (`spec.replicas`) at their count; None unless the StaticCapacity gate is on."""
    zonal_shift: zonalshift.ZonalShiftController | None = None
    """ZonalShiftActive/Cleared events on NodePools; None unless the cloud follows zonal shifts."""
    queues: dict[str, workqueue.WorkQueue] = dataclasses.field(default_factory=dict)

    def queue(self, name: str) -> workqueue.WorkQueue:
        return self.queues[name]


NODECLAIMS: Final = "nodeclaims"


NODES: Final = "nodes"


NODEPOOLS: Final = "nodepools"


NODECLASSES: Final = "ec2nodeclasses"


NODEOVERLAYS: Final = "nodeoverlays"


STATIC_NODEPOOLS: Final = "static nodepools"


CAPACITYBUFFERS: Final = "capacitybuffers"


NODECLAIM_WORKERS: Final = 1000
"""NodeClaims reconciled at once (upstream's lifecycle controller: 1,000 at one CPU): a burst of launches reaches the
cloud provider together, where CreateFleet requests of one shape merge into one call."""


NODE_WORKERS: Final = 100
"""Nodes terminated at once (upstream's termination controller: 100 at one CPU): their instances' describes and
terminations merge into one call each."""
