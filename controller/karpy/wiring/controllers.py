"""One builder per controller, named after it: each takes the parts every controller shares (`Shared`) and what it
needs from another controller, and returns the controller built with its work queue and its state-cache listener, so
nothing is assigned after construction (core: pkg/controllers/controllers.go NewControllers; aws:
pkg/controllers/controllers.go). A gated controller's builder returns None with its gate off, as upstream registers
it only then. `graph.build` calls them in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, TypeVar

from karpy import clock as karpy_clock
from karpy import events, rejections, tasks
from karpy import settings as karpy_settings
from karpy.capacitybuffer import controller as capacitybuffer_controller
from karpy.cloudprovider import overlay
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider import types as cloudprovider_types
from karpy.disruption import controller as disruption_controller
from karpy.interruption import controller as interruption_controller
from karpy.interruption import observer as interruption_observer
from karpy.kube import client, resources
from karpy.nodeclaim import conditions_controller, consistency, expiration, lifecycle_observer, repair, roles, written
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclaim import registration as nodeclaim_registration
from karpy.nodeclass import controller as nodeclass_controller
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.nodepool import controller as nodepool_controller
from karpy.nodepool import zonalshift
from karpy.provisioning import batcher, provisioner
from karpy.runtime import metrics, parts, workqueue
from karpy.runtime.metrics import operatorpkg, queues
from karpy.scheduling import scheduler
from karpy.state import cluster as state_cluster
from karpy.static import controller as static_controller
from karpy.static import provisioning as static_provisioning
from karpy.termination import controller as termination_controller
from karpy.termination import observer as termination_observer


@dataclasses.dataclass(frozen=True, slots=True)
class Shared:
    """What every controller is built from: the writing client (a dry-run one under DRY_RUN), the state cache, the
    cloud's parts, the clock, the recorder, the metrics and the rejection reports."""

    settings: karpy_settings.Settings
    timings: parts.Timings
    writer: client.KubeClient
    cluster: state_cluster.Cluster
    cloud: cloudprovider_parts.CloudParts
    clock: karpy_clock.Clock
    recorder: events.KubeRecorder
    registry: metrics.Metrics
    rejected: rejections.Rejections
    queue_series: queues.QueueSeries
    nodeclaim_writes: written.Written = dataclasses.field(default_factory=written.Written)
    """What the NodeClaim reconcilers last wrote, shared so that neither acts on a cache lacking the other's write."""

    @property
    def roles(self) -> roles.ClusterRoles:
        """The writer, the state cache and the clock, as the loops over the cluster state take them."""
        return roles.ClusterRoles(client=self.writer, cluster=self.cluster, clock=self.clock)

    def metered(self, controller: str) -> cloudprovider_types.CloudProvider:
        """The provider as `controller` (upstream's controller name) calls it, timed and its errors counted."""
        return self.registry.metered(self.cloud.provider, controller, clock=self.clock)

    def queue(
        self, name: str, reconcile: workqueue.Reconcile, res: resources.Resource, workers: int
    ) -> workqueue.WorkQueue:
        return workqueue.WorkQueue(
            name,
            reconcile,
            clock=self.clock,
            workers=workers,
            on_error=self._reporting(res),
            metrics=self.queue_series.hooks(name),
        )

    def _reporting(self, res: resources.Resource) -> workqueue.ErrorHook:
        """A queue's failed reconcile of `key`, reported about the object as the state cache holds it."""

        def report(key: str, exc: Exception) -> None:
            if rejections.transient(exc):
                return  # the API server or the cloud failed, not the object: the queue's retry line says so
            about = rejections.about(res, self.cluster.raw(res, key), name=key)
            problem = f"reconciling it raised {type(exc).__name__}: {exc}"
            self.rejected.report(about, reason=rejections.Reason.HANDLING_FAILED, problem=problem, exc=exc)

        return report


T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Queued(Generic[T]):
    """A controller and the work queue that feeds it."""

    controller: T
    queue: workqueue.WorkQueue


def nodeclaim_lifecycle(
    s: Shared, registration: nodeclaim_registration.RegistrationHealth, *, leading_since: Callable[[], float]
) -> Queued[nodeclaim_controller.NodeClaimController]:
    built = nodeclaim_controller.NodeClaimController(
        nodeclaim_controller.Deps(
            client=s.writer,
            cloud=s.metered("nodeclaim.lifecycle"),
            clock=s.clock,
            observer=lifecycle_observer.Observer(s.recorder, s.registry.nodeclaim_hooks()),
            rejections=s.rejected,
            registration=registration,
            nodes_for_provider_id=s.cluster.nodes_for_provider_id,
            claims=s.cluster.nodeclaim,
            own_writes=s.nodeclaim_writes,
            leading_since=leading_since,
        )
    )
    return Queued(built, s.queue(parts.NODECLAIMS, built.reconcile, resources.NODECLAIMS, parts.NODECLAIM_WORKERS))


def termination(s: Shared) -> Queued[termination_controller.TerminationController]:
    observer = termination_observer.Observer(s.recorder, s.registry.termination_hooks())
    deps = termination_controller.Deps(
        client=s.writer, cloud=s.metered("node.termination"), clock=s.clock, observer=observer, rejections=s.rejected
    )
    built = termination_controller.TerminationController(deps, claims=s.cluster)
    return Queued(built, s.queue(parts.NODES, built.reconcile, resources.NODES, parts.NODE_WORKERS))


def nodepool(
    s: Shared, registration: nodeclaim_registration.RegistrationHealth
) -> Queued[nodepool_controller.NodePoolController]:
    built = nodepool_controller.NodePoolController(s.writer, s.cluster, clock=s.clock, registration=registration)
    return Queued(built, s.queue(parts.NODEPOOLS, built.reconcile, resources.NODEPOOLS, 2))


def capacity_buffer(
    s: Shared, trigger: Callable[[str], None]
) -> Queued[capacitybuffer_controller.CapacityBufferController] | None:
    if not s.settings.feature_gates.capacity_buffer:  # upstream registers the buffer controller only under the gate
        return None
    built = capacitybuffer_controller.CapacityBufferController(s.writer, s.cluster, clock=s.clock, trigger=trigger)
    work = s.queue(parts.CAPACITYBUFFERS, built.reconcile, resources.CAPACITYBUFFERS, 10)
    s.cluster.add_listener(built.listener(work.add))
    s.registry.watch_objects(operatorpkg.CAPACITYBUFFERS)  # upstream's buffer status controller, gated alike
    return Queued(built, work)


def provisioning(
    s: Shared, buffers: Queued[capacitybuffer_controller.CapacityBufferController] | None
) -> provisioner.Provisioner:
    return provisioner.Provisioner(
        provisioner.Deps(
            client=s.writer,
            cluster=s.cluster,
            cloud=s.metered("provisioner"),
            clock=s.clock,
            recorder=s.recorder,
            settings=provisioner.Settings(
                window=batcher.WindowSettings(
                    idle=s.settings.batch.idle_duration, max_duration=s.settings.batch.max_duration
                ),
                scheduling=s.settings.scheduling,
            ),
            metrics=s.registry.provisioner_hooks(),
            rejections=s.rejected,
            buffer_pods=s.cluster.buffer_pods,
            observe_plan=buffers.controller.observe_plan if buffers is not None else None,
        )
    )


def disruption(s: Shared) -> disruption_controller.DisruptionController:
    return disruption_controller.DisruptionController(
        disruption_controller.Deps(
            client=s.writer,
            cluster=s.cluster,
            cloud=s.metered("disruption"),
            clock=s.clock,
            recorder=s.recorder,
            settings=disruption_controller.Settings(
                dry_run=s.settings.runtime.dry_run,
                spot_to_spot=s.settings.feature_gates.spot_to_spot_consolidation,
                scheduling=s.settings.scheduling,
                poll=s.timings.disruption_poll,
                validation_delay=s.timings.validation_delay,
            ),
            metrics=s.registry.disruption_hooks(),
            rejections=s.rejected,
            # The pass runs its simulations on the event loop's thread: each solve pauses the collector there.
            solver=tasks.without_collector(scheduler.solve),
        )
    )


def interruption(
    s: Shared, source: cloudprovider_parts.QueueClient | None
) -> interruption_controller.InterruptionController | None:
    """The loop over one source of interruption messages (the SQS queue, or instance health); None without one."""
    if source is None:
        return None
    observer = interruption_observer.Observer(s.recorder, s.registry.interruption_hooks())
    deps = interruption_controller.Deps(
        client=s.writer, cluster=s.cluster, queue=source, clock=s.clock, observer=observer, offerings=s.cloud.offerings
    )
    return interruption_controller.InterruptionController(deps)


def nodeclaim_disruption(s: Shared) -> conditions_controller.NodeClaimConditionsController:
    built = conditions_controller.NodeClaimConditionsController(
        s.roles, s.metered("nodeclaim.disruption"), metrics=s.registry.drift_hooks(), own_writes=s.nodeclaim_writes
    )
    s.cluster.add_listener(built.observe)
    return built


def nodeclaim_expiration(s: Shared) -> expiration.ExpirationController:
    return expiration.ExpirationController(s.roles, expiration.Observer(s.recorder, s.registry.expiry_hooks()))


def nodeclaim_consistency(s: Shared) -> consistency.ConsistencyController:
    return consistency.ConsistencyController(s.roles, consistency.Observer(s.recorder))


def nodeclass(s: Shared) -> Queued[nodeclass_controller.NodeClassController] | None:
    if s.cloud.nodeclasses is None:
        return None
    built = nodeclass_controller.NodeClassController(
        nodeclass_controller.Deps(
            client=s.writer, cluster=s.cluster, cloud=s.cloud.nodeclasses, clock=s.clock, recorder=s.recorder
        )
    )
    return Queued(built, s.queue(parts.NODECLASSES, built.reconcile, resources.EC2NODECLASSES, 2))


def node_health(s: Shared) -> repair.RepairController | None:
    policies = s.cloud.provider.repair_policies()
    if not (s.settings.feature_gates.node_repair and policies):  # upstream registers node.health only then
        return None
    observer = repair.Observer(s.recorder, s.registry.repair_hooks())
    return repair.RepairController(s.roles, observer, policies=policies)


def static_capacity(
    s: Shared, create: static_provisioning.Create
) -> Queued[static_controller.StaticPoolController] | None:
    if not s.settings.feature_gates.static_capacity:  # upstream registers both static controllers only under the gate
        return None
    built = static_controller.StaticPoolController(
        static_controller.Deps(
            client=s.writer, cluster=s.cluster, clock=s.clock, create=create, dry_run=s.settings.runtime.dry_run
        )
    )
    return Queued(built, s.queue(parts.STATIC_NODEPOOLS, built.reconcile, resources.NODEPOOLS, 2))


def nodeoverlay(
    s: Shared, overlays: overlay.Overlays | None, undecorated: cloudprovider_types.CloudProvider
) -> Queued[nodeoverlay_controller.NodeOverlayController] | None:
    """Evaluates NodeOverlays against `undecorated`'s list prices; None unless the NodeOverlay gate made a store."""
    if overlays is None:
        return None
    built = nodeoverlay_controller.NodeOverlayController(
        s.writer, s.cluster, cloud=undecorated, overlays=overlays, clock=s.clock
    )
    work = s.queue(parts.NODEOVERLAYS, built.reconcile, resources.NODEOVERLAYS, 1)
    s.cluster.add_listener(built.listener(work.add))
    return Queued(built, work)


def zonal_shift(s: Shared) -> zonalshift.ZonalShiftController | None:
    if s.cloud.zonal_shifts is None:
        return None
    return zonalshift.ZonalShiftController(s.cloud.zonal_shifts, s.cluster, recorder=s.recorder, clock=s.clock)
