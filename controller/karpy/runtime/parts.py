"""The shape of a running controller's object graph: `Controller` (everything `app.run` starts), the factory of the
cloud provider's parts (`karpy.cloudprovider.parts.CloudParts`), the loop timings and the names of the per-object
work queues. `karpy.wiring.graph.build` fills it in; the
runtime (`routing`, `leadership`) and the process run it. Construction happens elsewhere: no logic here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Final

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy import settings as karpy_settings
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.disruption import controller as disruption_controller
from karpy.disruption import validation as disruption_validation
from karpy.interruption import controller as interruption_controller
from karpy.kube import client
from karpy.nodeclaim import conditions_controller, consistency, expiration, repair
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclass import controller as nodeclass_controller
from karpy.nodepool import controller as nodepool_controller
from karpy.nodepool import zonalshift
from karpy.provisioning import provisioner
from karpy.runtime import lease, metrics, workqueue
from karpy.state import cluster as state_cluster
from karpy.static import controller as static_controller
from karpy.termination import controller as termination_controller


@dataclasses.dataclass(frozen=True, slots=True)
class Timings:
    """Loop timings that upstream hard-codes (no setting, no env var): `karpy run` always uses the defaults; the
    emulation's demo and wall-clock tests shorten them so that a scenario takes seconds, not minutes."""

    disruption_poll: float = disruption_controller.POLL
    """Seconds between disruption passes that found nothing to do (upstream 10 s)."""
    validation_delay: float = disruption_validation.VALIDATION_DELAY
    """Seconds a consolidation command waits before it is validated again (upstream 15 s)."""


CloudFactory = Callable[
    [karpy_settings.Settings, state_cluster.Cluster, karpy_clock.Clock], cloudprovider_parts.CloudParts
]


@dataclasses.dataclass(slots=True)
class Controller:
    """Everything `app.run` starts. `queues` hold per-object work fed by the state cache's listener (`routing`)."""

    settings: karpy_settings.Settings
    kube: client.KubeClient
    cluster: state_cluster.Cluster
    cloud: cloudprovider_parts.CloudParts
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
    queues: Mapping[str, workqueue.WorkQueue]
    """The per-object work queues by name (`NODECLAIMS`, `NODES`, ...), built with their reconcilers."""
    instance_status: interruption_controller.InterruptionController | None = None
    """The interruption loop over instance health (impaired checks, scheduled events); None without a source."""
    repair: repair.RepairController | None = None
    """Replaces unhealthy nodes; None unless the NodeRepair gate is on and the provider has repair policies."""
    static_pools: static_controller.StaticPoolController | None = None
    """Keeps static NodePools (`spec.replicas`) at their count; None unless the StaticCapacity gate is on."""
    zonal_shift: zonalshift.ZonalShiftController | None = None
    """ZonalShiftActive/Cleared events on NodePools; None unless the cloud follows zonal shifts."""

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
