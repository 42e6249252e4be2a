"""`ControlPlane`: the karpy controller run in-process against an `EmulatedCluster`, for the demo, e2e tests and bench.

It is the real controller, built the way the operator builds it: the AWS provider on boto3 (pointed at moto by
the cluster's `AWS_ENDPOINT_URL`), a RestClient on the emulator's API server, the informer-fed `state.Cluster`, the
provisioner, the NodeClaim lifecycle, termination, disruption and interruption reconcilers and the NodePool /
EC2NodeClass status controllers, each per-object reconciler drained by a keyed `WorkQueue` that watch events fill
(what Kopf's handlers do in `karpy run`). Optional Lease leader election gates everything but the informers.

Every write and cloud call passes a checkpoint (`hooks`), so a test can kill the controller at an exact step and
start a fresh one with fresh state against the same cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from karpy import clock as clock_module
from karpy.api import labels
from karpy.cloudprovider.aws import clients, emulator, instancestatus, interruption, provider
from karpy.disruption import controller as disruption_controller
from karpy.interruption import messages
from karpy.kube import client, config, resources, rest
from karpy.operator import settings as settings_module
from karpy.operator import wiring
from karpy.sim import autojump, hooks
from karpy.sim import cluster as emulated_cluster
from karpy.state import cluster as state_cluster
from karpy.state import informer

log = logging.getLogger(__name__)

QUEUE_WAIT_SECONDS = 1
"""SQS long-poll of the emulated queue: short, so that stopping never waits on a blocked boto3 thread."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    identity: str = "karpy-0"
    batch_idle: float = 1.0
    batch_max: float = 10.0
    disruption_poll: float = disruption_controller.POLL
    validation_delay: float = 15.0
    leader_election: bool = False
    interruption: bool = True
    qps: float = 1000.0
    burst: int = 2000
    fast_catalog: bool = True
    """Answer the catalog calls from moto's data in this process (moto serialises ~1,400 shapes over HTTP in ~20 s).
    Off for measuring the controller: importing moto's EC2 data costs the process ~120 MB no real controller has."""


class _ShortPollQueue:
    """The SQS queue with a short long-poll (see QUEUE_WAIT_SECONDS)."""

    def __init__(self, inner: interruption.InterruptionQueue) -> None:
        self._inner = inner

    @property
    def unparseable(self) -> int:
        return self._inner.unparseable

    async def receive(self, *, wait_seconds: int = QUEUE_WAIT_SECONDS) -> list[messages.Received]:
        return await self._inner.receive(wait_seconds=min(wait_seconds, QUEUE_WAIT_SECONDS))

    async def delete(self, received: messages.Received) -> None:
        await self._inner.delete(received)


def provisionable(pod: Mapping[str, Any]) -> bool:
    """Pending and marked Unschedulable by the scheduler, not terminal, not deleting, not a DaemonSet's."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("nominatedNodeName"):
        return False
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or ()):
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
    )


class Target(Protocol):
    """What the controller is pointed at: an `EmulatedCluster`, or a `remote.RemoteCluster` in another process
    (boto3 finds the emulated AWS through the `AWS_*` variables both set in `os.environ`)."""

    @property
    def clock(self) -> clock_module.Clock: ...

    @property
    def options(self) -> emulated_cluster.ClusterOptions: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def api_url(self) -> str: ...

    @property
    def queue_name(self) -> str: ...


class ControlPlane:
    """`async with ControlPlane(emulated) as cp:` runs the controller until the block ends (or `stop()`)."""

    def __init__(
        self,
        emulated: Target,
        options: Options | None = None,
        *,
        hook: hooks.Hook = hooks.no_hook,
    ) -> None:
        self.options = opts = options or Options()
        self.emulated = emulated
        self.clock = emulated.clock
        self._hook = hook
        # The limiter runs on the wall clock: on a virtual clock it would park requests until time moves.
        self._rest = rest.RestClient(
            config.Config(server=emulated.api_url),
            clock=clock_module.SystemClock(),
            qps=opts.qps,
            burst=opts.burst,
            activity=autojump.activity_of(self.clock),
        )
        self.provider: provider.AWSCloudProvider | None = None
        self.ctrl = wiring.build(
            self.settings(),
            kube=hooks.HookedClient(self._rest, hook),
            clock=self.clock,
            cloud_factory=self._cloud,
            identity=opts.identity,
            namespace="default",
        )
        ctrl = self.ctrl
        # The demo and tests shorten the disruption loop's poll and validation delay (upstream: 10 s and 15 s).
        ctrl.disruption = disruption_controller.DisruptionController(
            disruption_controller.Deps(
                client=ctrl.kube,
                cluster=ctrl.cluster,
                cloud=ctrl.cloud.provider,
                clock=self.clock,
                recorder=ctrl.recorder,
                settings=disruption_controller.Settings(
                    poll=opts.disruption_poll, validation_delay=opts.validation_delay
                ),
                metrics=ctrl.metrics.disruption_hooks(),
            )
        )
        ctrl.cluster.add_listener(self._on_event)
        self._task: asyncio.Task[None] | None = None
        self.leading = False

    def settings(self) -> settings_module.Settings:
        opts, emulated = self.options, self.emulated
        return settings_module.Settings(
            cluster=settings_module.ClusterSettings(name=emulated.cluster_name, endpoint=emulated.api_url),
            aws=settings_module.AWSSettings(
                region=emulated.region,
                interruption_queue=emulated.queue_name if opts.interruption else "",
                isolated_vpc=True,
            ),
            batch=settings_module.BatchSettings(max_duration=opts.batch_max, idle_duration=opts.batch_idle),
            leader_election=settings_module.LeaderElectionSettings(disabled=not opts.leader_election),
        )

    def _cloud(
        self, settings: settings_module.Settings, cluster: state_cluster.Cluster, clock: clock_module.Clock
    ) -> wiring.CloudParts:
        """The AWS parts as `karpy.cloudprovider.aws.factory` builds them, plus the emulator's fast catalog hooks,
        a short SQS poll and the checkpoints."""
        emulated = self.emulated
        aws = clients.build_clients(region=emulated.region, max_attempts=3)
        if self.options.fast_catalog:
            emulator.install_fast_catalog(aws.ec2, region=emulated.region)
        self.provider = provider.AWSCloudProvider(
            provider.Dependencies(
                aws=aws,
                clock=clock.now,
                settings=provider.Settings(
                    cluster_name=settings.cluster.name,
                    region=emulated.region,
                    cluster_endpoint=settings.cluster.endpoint,
                    k8s_version=emulated.options.k8s_version,
                    isolated_vpc=settings.aws.isolated_vpc,
                ),
                nodeclass_lookup=lambda name: cluster.nodeclasses().get(name),
            )
        )
        queue = None
        if settings.aws.interruption_queue:
            queue = _ShortPollQueue(interruption.InterruptionQueue(aws=aws, queue_name=settings.aws.interruption_queue))
        return wiring.CloudParts(
            provider=hooks.HookedCloud(self.provider, self._hook),
            nodeclasses=self.provider,
            queue=queue,
            offerings=self.provider.unavailable,
            instance_status=instancestatus.InstanceStatusPoller(aws=aws, clock=clock.now, sleep=clock.sleep),
        )

    @property
    def cluster(self) -> state_cluster.Cluster:
        return self.ctrl.cluster

    @property
    def client(self) -> client.KubeClient:
        return self.ctrl.kube

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def __aenter__(self) -> ControlPlane:
        self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self._run(), name=f"karpy controller {self.options.identity}")
        return self._task

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    async def stop(self) -> None:
        """Cancel everything and close the client (idempotent; also the way to 'kill' it from outside)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if not self._task.cancelled() and self._task.exception() is not None:
                log.error("controller %s ended with an error", self.options.identity, exc_info=self._task.exception())
            self._task = None
        await self._rest.close()

    async def _run(self) -> None:
        ctrl = self.ctrl
        async with asyncio.TaskGroup() as group:
            group.create_task(informer.run_informers(ctrl.kube, ctrl.cluster), name="informers")
            group.create_task(ctrl.elector.run(), name="leader election")
            group.create_task(ctrl.recorder.run(), name="event recorder")
            while True:
                await ctrl.elector.elected.wait()
                lead = asyncio.create_task(self._lead(), name="leading")
                deposed = asyncio.create_task(ctrl.elector.deposed.wait())
                try:
                    await asyncio.wait([lead, deposed], return_when=asyncio.FIRST_COMPLETED)
                    if lead.done():
                        lead.result()  # a failed loop ends the controller, as in `karpy run`
                finally:
                    for task in (lead, deposed):
                        task.cancel()
                    await asyncio.gather(lead, deposed, return_exceptions=True)
                    for queue in ctrl.queues.values():
                        queue.clear()

    async def _lead(self) -> None:
        """The leader's loops (as `karpy.operator.app.singletons`), then one reconcile of everything inherited."""
        ctrl = self.ctrl
        self.leading = True
        try:
            async with asyncio.TaskGroup() as group:
                for name, queue in ctrl.queues.items():
                    group.create_task(queue.run(), name=f"queue {name}")
                group.create_task(ctrl.provisioner.run(), name="provisioner")
                group.create_task(ctrl.disruption.run(), name="disruption")
                group.create_task(ctrl.nodeclaims.run_garbage_collection(), name="garbage collection")
                if ctrl.interruption is not None:
                    group.create_task(ctrl.interruption.run(), name="interruption")
                if ctrl.instance_status is not None:
                    group.create_task(ctrl.instance_status.run(), name="instance status")
                if ctrl.nodeclaim_conditions is not None:
                    group.create_task(ctrl.nodeclaim_conditions.run(), name="nodeclaim conditions")
                if ctrl.expiry is not None:
                    group.create_task(ctrl.expiry.run(), name="expiration")
                while not ctrl.cluster.synced():
                    await self.clock.sleep(0.2)
                self._enqueue_everything()
        finally:
            self.leading = False

    def _enqueue_everything(self) -> None:
        """After a (re)start or a new leadership: every object gets one reconcile, as `karpy run` resyncs."""
        ctrl = self.ctrl
        for claim in ctrl.cluster.objects(resources.NODECLAIMS):
            ctrl.queue(wiring.NODECLAIMS).add(_name(claim))
        for node in ctrl.cluster.objects(resources.NODES):
            if (node.get("metadata") or {}).get("deletionTimestamp"):
                ctrl.queue(wiring.NODES).add(_name(node))
        for pool in ctrl.cluster.objects(resources.NODEPOOLS):
            ctrl.queue(wiring.NODEPOOLS).add(_name(pool))
        if wiring.NODECLASSES in ctrl.queues:
            for nc in ctrl.cluster.objects(resources.EC2NODECLASSES):
                ctrl.queue(wiring.NODECLASSES).add(_name(nc))

    # -- events → queues (what Kopf's handlers do in `karpy run`) ---------------------------------------------

    def _on_event(
        self, res: resources.Resource, before: Mapping[str, Any] | None, current: Mapping[str, Any] | None
    ) -> None:
        ctrl = self.ctrl
        obj = current if current is not None else before
        if obj is None:
            return
        name = _name(obj)
        meta = obj.get("metadata") or {}
        queues = ctrl.queues
        if res == resources.NODECLAIMS:
            if current is not None:
                queues[wiring.NODECLAIMS].add(name)
            pool = (meta.get("labels") or {}).get(labels.LABEL_NODEPOOL)
            if pool:
                queues[wiring.NODEPOOLS].add(str(pool))
        elif res == resources.NODES:
            # A Node's changes (registration, Ready, startup taints) move its NodeClaim's lifecycle.
            for claim in ctrl.cluster.nodeclaims_for_node(obj):
                queues[wiring.NODECLAIMS].add(claim.name)
            if current is not None and meta.get("deletionTimestamp"):
                queues[wiring.NODES].add(name)
        elif res == resources.PODS:
            if current is not None and provisionable(current):
                ctrl.provisioner.trigger(str(meta.get("uid") or name))
        elif res == resources.NODEPOOLS:
            if current is not None:
                queues[wiring.NODEPOOLS].add(name)
        elif res == resources.EC2NODECLASSES and wiring.NODECLASSES in queues:
            if current is not None:
                queues[wiring.NODECLASSES].add(name)
            for pool in ctrl.cluster.objects(resources.NODEPOOLS):
                queues[wiring.NODEPOOLS].add(_name(pool))


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
