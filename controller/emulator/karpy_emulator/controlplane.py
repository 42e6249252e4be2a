"""`ControlPlane`: the karpy controller run in-process against an `EmulatedCluster`, for the demo, e2e tests and bench.

It is the real controller: the object graph `karpy run` builds (`wiring.graph.build`: the AWS provider on boto3
pointed at moto by the cluster's `AWS_ENDPOINT_URL`, a RestClient on the emulator's API server, the informer-fed
`state.Cluster`, every reconciler and status controller, the state cache's listener routing watch events to the
work queues), run by the operator's own `leadership.lead` (the leader's loops, resync, LeadershipLost). With
`Options(run_app=True)` it runs `app.run` itself, metrics and health servers included. Optional Lease leader election
gates everything but the informers.

Every write and cloud call passes a checkpoint (`hooks`), so a test can kill the controller at an exact step and
start a fresh one with fresh state against the same cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
from collections.abc import Sequence
from typing import Protocol

import boto3

from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy import tasks
from karpy.cloudprovider import interruption as cloudprovider_interruption
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import (
    accounting,
    clients,
    ec2batch,
    instancestatus,
    interruption_queue,
    provider,
    zonalshift,
)
from karpy.cloudprovider.aws import faults as aws_faults
from karpy.disruption import controller as disruption_controller
from karpy.kube import client, credentials, rest
from karpy.operator import app
from karpy.runtime import leadership, parts
from karpy.state import cluster as state_cluster
from karpy.wiring import graph
from karpy_emulator import autojump, hooks
from karpy_emulator import cluster as karpy_emulator_cluster
from karpy_emulator.aws import seeding

log = logging.getLogger(__name__)

CONTROLLER_USER = "system:serviceaccount:default:karpy"
"""The controller's bearer token: the emulated API server records each request under it (`apiserver.audit`), so a
test can tell the controller's requests from the stand-ins' and check them against the chart's RBAC."""

QUEUE_WAIT_SECONDS = 1
"""How long an empty receive of the emulated queue waits, on the cluster's clock (see `_ShortPollQueue`)."""


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
    feature_gates: karpy_settings.FeatureGates = dataclasses.field(default_factory=karpy_settings.FeatureGates)
    """FEATURE_GATES as `karpy run` would read them (upstream's defaults unless a test turns one on)."""
    sdk_max_attempts: int = 3
    """Retries botocore makes of a failed AWS call before the controller sees the error (0: none, so every injected
    fault reaches the controller and no SDK backoff sleeps on the wall clock)."""
    faults: aws_faults.Faults | None = None
    """Faults injected into the controller's AWS calls (its own clients only: the emulation's calls are not hit)."""
    run_app: bool = False
    """Run `karpy.operator.app.run` itself (its metrics and health servers on ephemeral ports) instead of only the
    loops it starts: the whole `karpy run` path after the login."""
    zonal_shift_endpoint: str = ""
    """URL of an ARC zonal shift endpoint (`karpy_emulator.aws.arczonalshift`): with one, the controller runs as
    with ENABLE_ZONAL_SHIFT=true against it (moto has no such service); "" runs it with the setting off."""


class _ShortPollQueue:
    """The SQS queue, its long poll played on the cluster's clock: a receive that does not wait, and when it found
    nothing, a sleep of QUEUE_WAIT_SECONDS on the clock. A real long poll blocks a boto3 thread: on the autojump
    clock that counts as work in flight, and a poller that always has one open would hold virtual time still; on
    any clock, stopping would wait for the blocked thread."""

    def __init__(self, inner: interruption_queue.InterruptionQueue, *, clock: karpy_clock.Clock) -> None:
        self._inner = inner
        self._clock = clock

    async def receive(
        self, *, wait_seconds: int = QUEUE_WAIT_SECONDS
    ) -> Sequence[cloudprovider_interruption.Received | cloudprovider_interruption.Unreadable]:
        found = await self._inner.receive(wait_seconds=0)
        if not found:
            await self._clock.sleep(min(wait_seconds, QUEUE_WAIT_SECONDS))
        return found

    async def delete(
        self, received: cloudprovider_interruption.Received | cloudprovider_interruption.Unreadable
    ) -> None:
        await self._inner.delete(received)


class Target(Protocol):
    """What the controller is pointed at: an `EmulatedCluster`, or a `remote.RemoteCluster` in another process
    (boto3 finds the emulated AWS through the `AWS_*` variables both set in `os.environ`)."""

    @property
    def clock(self) -> karpy_clock.Clock: ...

    @property
    def options(self) -> karpy_emulator_cluster.ClusterOptions: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def api_url(self) -> str: ...

    @property
    def queue_name(self) -> str: ...


class ControlPlane:
    """`async with ControlPlane(emulated) as cp:` runs the controller until the block ends (or `stop()`).

    A replica that loses the Lease raises `leadership.LeadershipLost` as `karpy run` does; here the "Deployment"
    restarts it at once as a fresh follower: a new object graph (`ctrl`), the same identity and API connection."""

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
        self._dead = False
        # The limiter runs on the wall clock: on a virtual clock it would park requests until time moves. Retries
        # wait on the cluster's clock, as the controller's own timers do; their jitter is seeded per replica.
        self._rest = rest.RestClient(
            credentials.bearer(emulated.api_url, CONTROLLER_USER),
            clock=karpy_clock.SystemClock(),
            qps=opts.qps,
            burst=opts.burst,
            activity=autojump.activity_of(self.clock),
            backoff_clock=self.clock,
            rng=random.Random(opts.identity),
        )
        self.provider: provider.AWSCloudProvider | None = None
        self.aws_calls = accounting.ApiCalls()
        """Every AWS call of the controller, across restarts (each incarnation's clients count here)."""
        self.restarts = 0
        """How many times the replica lost the Lease and came back as a follower."""
        self.ctrl = self._build()
        self._task: asyncio.Task[None] | None = None

    def _build(self) -> parts.Controller:
        """The object graph `karpy run` builds (`graph.build`), with the checkpoints around every side effect."""
        opts = self.options
        return graph.build(
            self.settings(),
            kube=hooks.HookedClient(self._rest, self._checkpoint),
            clock=self.clock,
            cloud_factory=self._cloud,
            identity=opts.identity,
            namespace="default",
            timings=parts.Timings(disruption_poll=opts.disruption_poll, validation_delay=opts.validation_delay),
        )

    async def _checkpoint(self, point: str) -> None:
        """Every write and cloud call passes here: a killed replica reaches nothing any more (see `kill`)."""
        if self._dead:
            raise client.KubeError(503, "ServiceUnavailable", f"{self.options.identity} is dead ({point})")
        await self._hook(point)

    def settings(self) -> karpy_settings.Settings:
        opts, emulated = self.options, self.emulated
        return karpy_settings.Settings(
            cluster=karpy_settings.ClusterSettings(name=emulated.cluster_name, endpoint=emulated.api_url),
            aws=karpy_settings.AWSSettings(
                region=emulated.region,
                interruption_queue=emulated.queue_name if opts.interruption else "",
                isolated_vpc=True,
                enable_zonal_shift=bool(opts.zonal_shift_endpoint),
            ),
            batch=karpy_settings.BatchSettings(max_duration=opts.batch_max, idle_duration=opts.batch_idle),
            feature_gates=opts.feature_gates,
            leader_election=karpy_settings.LeaderElectionSettings(disabled=not opts.leader_election),
        )

    def _cloud(
        self, settings: karpy_settings.Settings, cluster: state_cluster.Cluster, clock: karpy_clock.Clock
    ) -> cloudprovider_parts.CloudParts:
        """The AWS parts as `karpy.cloudprovider.aws.factory` builds them, plus the emulator's fast catalog hooks,
        a short SQS poll and the checkpoints."""
        emulated = self.emulated
        aws = clients.build_clients(
            region=emulated.region, max_attempts=self.options.sdk_max_attempts, calls=self.aws_calls
        )
        if self.options.fast_catalog:
            seeding.install_fast_catalog(aws.ec2, region=emulated.region)
        if self.options.faults is not None:
            self.options.faults.install(aws, answered_in_process=seeding.FAST_CATALOG_OPERATIONS)
        shifts = None
        if settings.aws.enable_zonal_shift:
            arc = boto3.session.Session(region_name=emulated.region).client(
                "arc-zonal-shift", endpoint_url=self.options.zonal_shift_endpoint
            )
            aws.calls.install(arc)
            shifts = zonalshift.ZonalShifts(
                client=arc, clock=clock.now, eks=aws.eks, cluster_name=emulated.cluster_name
            )
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
                    batch_windows=ec2batch.windows_from(settings.ec2_batch),
                ),
                nodeclass_lookup=lambda name: cluster.nodeclasses().get(name),
                nodeclaims=cluster.nodeclaims,
                sleep=clock.sleep,
                zonal_shifts=shifts,
            )
        )
        queue = None
        if settings.aws.interruption_queue:
            queue = _ShortPollQueue(
                interruption_queue.InterruptionQueue(aws=aws, queue_name=settings.aws.interruption_queue),
                clock=clock,
            )
        return cloudprovider_parts.CloudParts(
            provider=hooks.HookedCloud(self.provider, self._checkpoint),
            nodeclasses=self.provider,
            queue=queue,
            offerings=self.provider.unavailable,
            instance_status=instancestatus.InstanceStatusPoller(aws=aws, clock=clock.now, sleep=clock.sleep),
            janitor=functools.partial(self.provider.launch_templates.run_janitor, sleep=clock.sleep),
            tagger=self.provider.tagger.run,
            api_calls=aws.calls,
            use_overlays=self.provider.use_overlays,
            use_kube_dns=self.provider.use_kube_dns,
            zonal_shifts=shifts,
            check=shifts.start if shifts is not None else None,
        )

    @property
    def cluster(self) -> state_cluster.Cluster:
        return self.ctrl.cluster

    @property
    def client(self) -> client.KubeClient:
        return self.ctrl.kube

    @property
    def leading(self) -> bool:
        """Running and holding the Lease (always, without leader election)."""
        return self._task is not None and not self._task.done() and self.ctrl.elector.is_leader()

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
        """Cancel everything and close the client (idempotent): a clean stop, which gives the Lease up."""
        if self.options.faults is not None:
            self.options.faults.clear()  # slow answers under way would otherwise hold worker threads past the stop
        if self._task is not None:
            for error in await tasks.cancel_and_wait([self._task]):
                log.error("controller %s ended with an error", self.options.identity, exc_info=error)
            self._task = None
        await self._rest.close()

    async def kill(self) -> None:
        """Die as a crashed process does: from now on no write or cloud call leaves this replica, so it cannot give
        its Lease up either; the others take over only once the Lease expires."""
        self._dead = True
        await self.stop()

    async def _run(self) -> None:
        while True:
            try:
                await self._incarnation()
                return
            except leadership.LeadershipLost as lost:
                log.info("restarting as a follower: %s", lost)
                self.restarts += 1
                self.ctrl = self._build()

    async def _incarnation(self) -> None:
        """One life of the process: what `karpy.operator.app.run` runs, until it ends (LeadershipLost) or is
        cancelled. With `Options.run_app` it *is* `app.run` (metrics and health servers on ephemeral ports); without,
        the same informers, elector, recorder and `leadership.lead`."""
        ctrl = self.ctrl
        if self.options.run_app:
            await app.run(
                ctrl, stop=asyncio.Event(), endpoints=app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0)
            )
            return
        if ctrl.cloud.check is not None:  # as `app.run` does first
            await ctrl.cloud.check()
        background = leadership.start(ctrl)
        try:
            await asyncio.wait(background, return_when=asyncio.FIRST_COMPLETED)
        finally:
            results = await leadership.cancel(background)
        leadership.raise_ending(background, results)
