"""Build the controller's object graph from settings: kube client → state cache → cloud provider → recorder →
reconcilers, metrics and leader election. Construction only; `app` runs what this builds.

The cloud side comes from a `CloudFactory`, so tests inject a fake provider and need no moto. The default factory
loads `karpy.cloudprovider.aws.factory` by name at start-up: importing it here would make the operator's import
graph depend on boto3, which the layering contract forbids (only `karpy.cloudprovider.aws` may reach boto3).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Final

from karpy import clock as karpy_clock
from karpy import events, rejections, tasks
from karpy import settings as karpy_settings
from karpy.capacitybuffer import controller as capacitybuffer_controller
from karpy.cloudprovider import dryrun as cloudprovider_dryrun
from karpy.cloudprovider import overlay
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider import types as cloudprovider_types
from karpy.disruption import controller as disruption_controller
from karpy.interruption import controller as interruption_controller
from karpy.kube import client, credentials, dryrun, resources, rest
from karpy.nodeclaim import conditions_controller, consistency, expiration, repair
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclaim import registration as nodeclaim_registration
from karpy.nodeclass import controller as nodeclass_controller
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.nodepool import controller as nodepool_controller
from karpy.nodepool import zonalshift
from karpy.provisioning import batcher, provisioner
from karpy.runtime import lease, metrics, observers, parts, routing, workqueue
from karpy.runtime.metrics import queues
from karpy.scheduling import scheduler
from karpy.state import cluster as state_cluster
from karpy.static import controller as static_controller
from karpy.termination import controller as termination_controller
from karpy.wiring import startup

DEFAULT_TIMINGS: Final = parts.Timings()
"""Upstream's loop timings (`karpy run` always uses them)."""


def with_overlays(cloud: cloudprovider_parts.CloudParts) -> tuple[overlay.Overlays, cloudprovider_parts.CloudParts]:
    """NodeOverlays on the cloud side: listings carry them, and so do launches where the provider can."""
    overlays = overlay.Overlays()
    if cloud.use_overlays is not None:
        cloud.use_overlays(overlays)
    return overlays, dataclasses.replace(cloud, provider=overlay.OverlaidProvider(cloud.provider, overlays))


def aws_cloud(environ: Mapping[str, str]) -> parts.CloudFactory:
    """The production factory: AWSCloudProvider (boto3 honours AWS_ENDPOINT_URL) and the SQS interruption queue.

    The region is settled here, once, as upstream settles it (setting, AWS_DEFAULT_REGION, then instance metadata;
    `cloudprovider.aws.startup.region`): this raises `cloudprovider.errors.StartupCheckFailed` naming the setting
    when none has one. Blocking when it asks instance metadata: call it before the event loop runs."""
    from karpy.cloudprovider.aws import startup

    settled = startup.region(environ.get("AWS_REGION", ""), environ, imds=startup.imds_region(environ))

    def build(
        settings: karpy_settings.Settings, cluster: state_cluster.Cluster, clock: karpy_clock.Clock
    ) -> cloudprovider_parts.CloudParts:
        # Imported here, not at module level: tests and `karpy run` with another provider never load boto3.
        from karpy.cloudprovider.aws import ec2batch, factory
        from karpy.cloudprovider.aws import provider as aws_provider

        region = settings.aws.region or settled
        aws_settings = aws_provider.Settings(
            cluster_name=settings.cluster.name,
            region=region,
            cluster_endpoint=settings.cluster.endpoint,
            isolated_vpc=settings.aws.isolated_vpc,
            vm_memory_overhead_percent=settings.aws.vm_memory_overhead_percent,
            reserved_enis=settings.aws.reserved_enis,
            dry_run=settings.runtime.dry_run,
            disable_dry_run=settings.aws.disable_dry_run,
            batch_windows=ec2batch.windows_from(settings.ec2_batch),
            enable_zonal_shift=settings.aws.enable_zonal_shift,
        )
        return factory.build(
            settings=aws_settings,
            interruption_queue=settings.aws.interruption_queue,
            clock=clock,
            nodeclass_lookup=lambda name: cluster.nodeclasses().get(name),
            nodeclaims=cluster.nodeclaims,
        )

    return build


def build(
    settings: karpy_settings.Settings,
    *,
    kube: client.KubeClient,
    clock: karpy_clock.Clock,
    cloud_factory: parts.CloudFactory,
    identity: str,
    namespace: str = "",
    timings: parts.Timings = DEFAULT_TIMINGS,
) -> parts.Controller:
    """The object graph; nothing runs yet. With DRY_RUN, `kube` is wrapped in a DryRunClient and the cloud parts
    in their dry-run wrappers (`cloudprovider.dryrun.wrap`)."""
    writer: client.KubeClient = dryrun.DryRunClient(kube) if settings.runtime.dry_run else kube
    recorder = events.KubeRecorder(writer, clock=clock, instance=identity)
    registry = metrics.Metrics(lease_name=settings.leader_election.name)
    rejected = rejections.Rejections(recorder, metrics=registry.rejection_hooks())
    cluster = state_cluster.Cluster(clock=clock, rejections=rejected)
    cloud = startup.with_kube_dns(cloud_factory(settings, cluster, clock), kube)
    if settings.runtime.dry_run:
        cloud = cloudprovider_dryrun.wrap(cloud)
    overlays = None
    if settings.feature_gates.node_overlay:  # upstream decorates the provider and runs the controller only then
        undecorated = cloud.provider  # overlays are evaluated against the list prices
        overlays, cloud = with_overlays(cloud)
        overlay_controller = nodeoverlay_controller.NodeOverlayController(
            writer, cluster, cloud=undecorated, overlays=overlays, clock=clock
        )
    elector: lease.LeaderElector | lease.AlwaysLeader
    if settings.leader_election.disabled:
        elector = lease.AlwaysLeader()
    else:
        elector = lease.LeaderElector(
            kube,  # the Lease is written even in dry-run: two dry-run replicas must not both act
            name=settings.leader_election.name,
            namespace=settings.leader_election.namespace or namespace or "default",
            clock=clock,
            identity=identity,
        )
    registration = nodeclaim_registration.RegistrationHealth()

    def metered(controller: str) -> cloudprovider_types.CloudProvider:
        """The provider as `controller` (upstream's controller name) calls it, timed and its errors counted."""
        return registry.metered(cloud.provider, controller, clock=clock)

    deps = nodeclaim_controller.Deps(
        client=writer,
        registration=registration,
        cloud=metered("nodeclaim.lifecycle"),
        clock=clock,
        recorder=recorder,
        metrics=registry.nodeclaim_hooks(),
        rejections=rejected,
        nodes=functools.partial(cluster.objects, resources.NODES),
    )
    buffers = None
    if settings.feature_gates.capacity_buffer:  # upstream registers the buffer controller only under the gate
        buffers = capacitybuffer_controller.CapacityBufferController(
            writer, cluster, clock=clock, trigger=lambda uid: prov.trigger(uid)
        )
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=writer,
            cluster=cluster,
            cloud=metered("provisioner"),
            clock=clock,
            recorder=recorder,
            settings=provisioner.Settings(
                window=batcher.WindowSettings(
                    idle=settings.batch.idle_duration, max_duration=settings.batch.max_duration
                ),
                scheduling=settings.scheduling,
            ),
            metrics=registry.provisioner_hooks(),
            rejections=rejected,
            buffer_pods=cluster.buffer_pods,
            observe_plan=buffers.observe_plan if buffers is not None else None,
        )
    )
    disruption = disruption_controller.DisruptionController(
        disruption_controller.Deps(
            client=writer,
            cluster=cluster,
            cloud=metered("disruption"),
            clock=clock,
            recorder=recorder,
            settings=disruption_controller.Settings(
                dry_run=settings.runtime.dry_run,
                spot_to_spot=settings.feature_gates.spot_to_spot_consolidation,
                scheduling=settings.scheduling,
                poll=timings.disruption_poll,
                validation_delay=timings.validation_delay,
            ),
            metrics=registry.disruption_hooks(),
            rejections=rejected,
            # The pass runs its simulations on the event loop's thread: each solve pauses the collector there.
            solver=tasks.without_collector(scheduler.solve),
        )
    )

    def interruption_loop(
        source: cloudprovider_parts.QueueClient | None,
    ) -> interruption_controller.InterruptionController | None:
        if source is None:
            return None
        return interruption_controller.InterruptionController(
            interruption_controller.Deps(
                client=writer,
                cluster=cluster,
                queue=source,
                clock=clock,
                recorder=recorder,
                offerings=cloud.offerings,
                metrics=registry.interruption_hooks(),
            )
        )

    interruption = interruption_loop(cloud.queue)
    nodeclaim_conditions = conditions_controller.NodeClaimConditionsController(
        conditions_controller.Deps(
            client=writer,
            cluster=cluster,
            cloud=metered("nodeclaim.disruption"),
            clock=clock,
            metrics=registry.drift_hooks(),
        )
    )
    cluster.add_listener(nodeclaim_conditions.observe)
    expiry = expiration.ExpirationController(
        expiration.Deps(client=writer, cluster=cluster, clock=clock, recorder=recorder, metrics=registry.expiry_hooks())
    )
    consistent = consistency.ConsistencyController(
        consistency.Deps(client=writer, cluster=cluster, clock=clock, recorder=recorder)
    )
    nodeclasses = None
    if cloud.nodeclasses is not None:
        nodeclasses = nodeclass_controller.NodeClassController(
            nodeclass_controller.Deps(
                client=writer, cluster=cluster, cloud=cloud.nodeclasses, clock=clock, recorder=recorder
            )
        )
    repairer = None
    policies = cloud.provider.repair_policies()
    if settings.feature_gates.node_repair and policies:  # upstream registers node.health only then
        repairer = repair.RepairController(
            repair.Deps(
                client=writer,
                cluster=cluster,
                clock=clock,
                recorder=recorder,
                policies=policies,
                metrics=registry.repair_hooks(),
            )
        )
    static_pools = None
    if settings.feature_gates.static_capacity:  # upstream registers both static controllers only under the gate
        static_pools = static_controller.StaticPoolController(
            static_controller.Deps(
                client=writer,
                cluster=cluster,
                clock=clock,
                create=prov.create_nodeclaims,
                dry_run=settings.runtime.dry_run,
            )
        )

    def reporting(res: resources.Resource) -> workqueue.ErrorHook:
        """A queue's failed reconcile of `key`, reported about the object as the state cache holds it."""

        def report(key: str, exc: Exception) -> None:
            if rejections.transient(exc):
                return  # the API server or the cloud failed, not the object: the queue's retry line says so
            about = rejections.about(res, cluster.raw(res, key), name=key)
            problem = f"reconciling it raised {type(exc).__name__}: {exc}"
            rejected.report(about, reason=rejections.Reason.HANDLING_FAILED, problem=problem, exc=exc)

        return report

    queue_series = queues.QueueSeries(registry.registry)

    def queue(name: str, reconcile: workqueue.Reconcile, res: resources.Resource, workers: int) -> workqueue.WorkQueue:
        return workqueue.WorkQueue(
            name, reconcile, clock=clock, workers=workers, on_error=reporting(res), metrics=queue_series.hooks(name)
        )

    nodeclaims = nodeclaim_controller.NodeClaimController(deps)
    termination = termination_controller.TerminationController(
        termination_controller.Deps(
            client=writer, cloud=metered("node.termination"), clock=clock, recorder=recorder, rejections=rejected
        ),
        metrics=registry.termination_hooks(),
        claims=cluster,
    )
    nodepools = nodepool_controller.NodePoolController(writer, cluster, clock=clock, registration=registration)
    work = {
        parts.NODECLAIMS: queue(parts.NODECLAIMS, nodeclaims.reconcile, resources.NODECLAIMS, parts.NODECLAIM_WORKERS),
        parts.NODES: queue(parts.NODES, termination.reconcile, resources.NODES, parts.NODE_WORKERS),
        parts.NODEPOOLS: queue(parts.NODEPOOLS, nodepools.reconcile, resources.NODEPOOLS, 2),
    }
    if static_pools is not None:
        work[parts.STATIC_NODEPOOLS] = queue(parts.STATIC_NODEPOOLS, static_pools.reconcile, resources.NODEPOOLS, 2)
    if nodeclasses is not None:
        work[parts.NODECLASSES] = queue(parts.NODECLASSES, nodeclasses.reconcile, resources.EC2NODECLASSES, 2)
    if overlays is not None:
        work[parts.NODEOVERLAYS] = queue(parts.NODEOVERLAYS, overlay_controller.reconcile, resources.NODEOVERLAYS, 1)
        cluster.add_listener(overlay_controller.listener(work[parts.NODEOVERLAYS].add))
    if buffers is not None:
        work[parts.CAPACITYBUFFERS] = queue(parts.CAPACITYBUFFERS, buffers.reconcile, resources.CAPACITYBUFFERS, 10)
        cluster.add_listener(buffers.listener(work[parts.CAPACITYBUFFERS].add))
    controller = parts.Controller(
        settings=settings,
        kube=writer,
        cluster=cluster,
        cloud=cloud,
        recorder=recorder,
        rejections=rejected,
        metrics=registry,
        elector=elector,
        clock=clock,
        nodeclaims=nodeclaims,
        termination=termination,
        provisioner=prov,
        disruption=disruption,
        interruption=interruption,
        nodepools=nodepools,
        nodeclasses=nodeclasses,
        nodeclaim_conditions=nodeclaim_conditions,
        expiration=expiry,
        consistency=consistent,
        queues=work,
        instance_status=interruption_loop(cloud.instance_status),
        static_pools=static_pools,
        repair=repairer,
        zonal_shift=zonalshift.ZonalShiftController(cloud.zonal_shifts, cluster, recorder=recorder, clock=clock)
        if cloud.zonal_shifts is not None
        else None,
    )

    registry.watch_state(cluster)
    registry.watch_cluster_series(cluster, now=clock.now, pod_times=prov.pod_times)
    registry.registry.register(queues.QueueCollector(lambda: work, now=clock.now))
    if cloud.api_calls is not None:
        registry.watch_cloud_calls(cloud.api_calls)
    cluster.add_listener(
        observers.Observer(
            observers.Hooks(
                trigger=prov.trigger,
                nodeclaim_terminated=lambda gone: registry.nodeclaim_terminated(
                    gone.nodepool, gone.capacity_type, gone.zone
                ),
                node_created=registry.node_created,
                pod_bound=registry.pod_bound,
                pod_started=registry.pod_started,
                pod_times=prov.pod_times,
                pod_provisioning_bound=registry.pod_provisioning_bound,
                pod_provisioning_started=registry.pod_provisioning_started,
                leading=elector.is_leader,
            )
        )
    )
    cluster.add_listener(registry.object_listener(now=clock.now, leading=elector.is_leader))
    # The informer's watch of each resource also feeds the work queues: no second watch (runtime.routing).
    cluster.add_listener(routing.listener(controller))
    return controller


def rest_client(
    settings: karpy_settings.Settings,
    creds: credentials.Credentials,
    *,
    clock: karpy_clock.Clock,
    relogin: credentials.Login | None = None,
) -> rest.RestClient:
    return rest.RestClient(
        creds,
        clock=clock,
        relogin=relogin,
        qps=settings.runtime.kube_client_qps,
        burst=settings.runtime.kube_client_burst,
    )
