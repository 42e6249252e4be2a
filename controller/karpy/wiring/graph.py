"""Build the controller's object graph from settings: kube client → state cache → cloud provider → recorder →
reconcilers, metrics and leader election. Construction only; `app` runs what this builds.

The cloud side comes from a `CloudFactory`, so tests inject a fake provider and need no moto. The default factory
loads `karpy.cloudprovider.aws.factory` by name at start-up: importing it here would make the operator's import
graph depend on boto3, which the layering contract forbids (only `karpy.cloudprovider.aws` may reach boto3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy import settings as karpy_settings
from karpy.cloudprovider import dryrun as cloudprovider_dryrun
from karpy.cloudprovider import overlay
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.kube import client, credentials, dryrun, rest
from karpy.nodeclaim import registration as nodeclaim_registration
from karpy.provisioning import provisioner
from karpy.runtime import lease, metrics, observers, parts, routing
from karpy.runtime.metrics import queues
from karpy.state import cluster as state_cluster
from karpy.wiring import controllers, startup

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
    undecorated = cloud.provider  # overlays are evaluated against the list prices
    overlays = None
    if settings.feature_gates.node_overlay:  # upstream decorates the provider and runs the controller only then
        overlays, cloud = with_overlays(cloud)
    s = controllers.Shared(
        settings=settings,
        timings=timings,
        writer=writer,
        cluster=cluster,
        cloud=cloud,
        clock=clock,
        recorder=recorder,
        registry=registry,
        rejected=rejected,
        queue_series=queues.QueueSeries(registry.registry),
    )
    elector = leader_elector(settings, kube=kube, clock=clock, identity=identity, namespace=namespace)
    registration = nodeclaim_registration.RegistrationHealth()
    # Listeners run in the order they are added: the builders that add one are called in this order.
    nodeclaim_conditions = controllers.nodeclaim_disruption(s)
    overlay_loop = controllers.nodeoverlay(s, overlays, undecorated)
    prov: provisioner.Provisioner  # the buffers trigger it and it reports its plans to them: bound on first call
    buffers = controllers.capacity_buffer(s, lambda uid: prov.trigger(uid))
    prov = controllers.provisioning(s, buffers)
    nodeclaims = controllers.nodeclaim_lifecycle(s, registration, leading_since=elector.leading_since)
    termination = controllers.termination(s)
    nodepools = controllers.nodepool(s, registration)
    static_pools = controllers.static_capacity(s, prov.create_nodeclaims)
    nodeclasses = controllers.nodeclass(s)
    queued = (nodeclaims, termination, nodepools, static_pools, nodeclasses, overlay_loop, buffers)
    work = {q.queue.name: q.queue for q in queued if q is not None}
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
        nodeclaims=nodeclaims.controller,
        termination=termination.controller,
        provisioner=prov,
        disruption=controllers.disruption(s),
        interruption=controllers.interruption(s, cloud.queue),
        nodepools=nodepools.controller,
        nodeclasses=nodeclasses.controller if nodeclasses is not None else None,
        nodeclaim_conditions=nodeclaim_conditions,
        expiration=controllers.nodeclaim_expiration(s),
        consistency=controllers.nodeclaim_consistency(s),
        queues=work,
        instance_status=controllers.interruption(s, cloud.instance_status),
        static_pools=static_pools.controller if static_pools is not None else None,
        repair=controllers.node_health(s),
        zonal_shift=controllers.zonal_shift(s),
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


def leader_elector(
    settings: karpy_settings.Settings,
    *,
    kube: client.KubeClient,
    clock: karpy_clock.Clock,
    identity: str,
    namespace: str,
) -> lease.LeaderElector | lease.AlwaysLeader:
    if settings.leader_election.disabled:
        return lease.AlwaysLeader(since=clock.now())
    return lease.LeaderElector(
        kube,  # the Lease is written even in dry-run: two dry-run replicas must not both act
        name=settings.leader_election.name,
        namespace=settings.leader_election.namespace or namespace or "default",
        clock=clock,
        identity=identity,
    )


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
