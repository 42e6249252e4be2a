"""`EmulatedCluster`: AWS (moto server) + a Kubernetes API server + kubelet, kube-scheduler, workload and PDB stand-ins.

    async with cluster.EmulatedCluster(cluster.ClusterOptions(cluster_name="demo")) as emulated:
        ...  # point the controller at emulated.kubeconfig and emulated.aws_env

Everything listens on 127.0.0.1 with a random port and stops with the block; no thread or task outlives it.
moto keeps its state process-wide, so the cluster resets moto on start and one EmulatedCluster runs per process at
a time. While it runs, the AWS variables of `aws_env` are set in `os.environ` (the seeding and boto3 clients of
the controller in the same process read them) and restored afterwards.

Time: with `virtual_time=False` the stand-ins loop on the wall clock every `interval` seconds. With
`virtual_time=True` the clock is a `ManualClock` shared with the API server's timestamps; nothing runs in the
background and `run_for(seconds)` moves time forward one `interval` at a time, running one pass of each stand-in
after each step (controller tasks sleeping on the same clock wake at their deadlines), so a long scenario takes
as long as its work, not its virtual duration. With `autojump=True` the clock is an `autojump.AutojumpClock`: the
stand-ins loop as on the wall clock, and time jumps to the next deadline whenever nothing is in flight (a
`ControlPlane` on this cluster shares the clock and reports its requests to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import pathlib
import tempfile
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from karpy import clock as karpy_clock
from karpy import tasks
from karpy.cloudprovider import catalog
from karpy.kube import clusterdns, credentials, rest
from karpy.kube import resources as kube_resources
from karpy_emulator import autojump, garbage, kube_scheduler, kubelet, pdbs, reads, taint_manager, workloads
from karpy_emulator.apiserver import faults, resources, runner, server, validation
from karpy_emulator.aws import idempotency, moto_instances, paging, seeding, serialized, sqs_time

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

log = logging.getLogger(__name__)

AWS_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION")
AWS_ENV_CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


def aws_environment(endpoint_url: str, region: str) -> dict[str, str]:
    """The environment an AWS SDK needs to talk to the emulator at `endpoint_url`."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
    }


def kube_dns_service(service_cidr: str, cluster_ip: str = "") -> dict[str, Any]:
    """The Service EKS' CoreDNS add-on runs behind, at `cluster_ip` or else the service CIDR's tenth address."""
    address = cluster_ip or str(ipaddress.ip_network(service_cidr).network_address + 10)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": clusterdns.NAME,
            "namespace": clusterdns.NAMESPACE,
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": address,
            "clusterIPs": [address],
            "selector": {"k8s-app": "kube-dns"},
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            ],
        },
    }


class AWSEnvironment:
    """Points this process's AWS SDKs at an emulator (`apply`) and puts back what was there before (`restore`).

    A profile, session token or config file of the user's would otherwise take precedence over the variables."""

    def __init__(self) -> None:
        self._saved: dict[str, str | None] = {}

    def apply(self, env: Mapping[str, str]) -> None:
        for key in (*AWS_ENV_KEYS, *AWS_ENV_CLEARED):
            self._saved.setdefault(key, os.environ.get(key))
        for key in AWS_ENV_CLEARED:
            os.environ.pop(key, None)
        os.environ.update(env)

    def restore(self) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved.clear()


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    cluster_name: str = "karpy-demo"
    region: str = "us-east-1"
    k8s_version: str = "1.31"
    zones: int = 3
    boot_delay: float = 5.0
    """Seconds from Node registration to Ready."""
    register_delay: float = 0.0
    """Seconds from an instance running to its Node registering."""
    interval: float = 1.0
    """Seconds between passes of each stand-in (and the step of `run_for` in virtual time)."""
    scheduler_qps: float = 50.0
    """Requests a second of the kube-scheduler stand-in's client, on this cluster's clock (kube-scheduler's
    clientConnection.qps default; EKS's Provisioned Control Plane tiers set 167, 283 and 400 for XL, 2XL and 4XL on
    Kubernetes 1.30+, per the EKS User Guide; 0: no limit, for a benchmark that must say so)."""
    scheduler_burst: int = 100
    """The kube-scheduler stand-in's client burst (clientConnection.burst's default)."""
    virtual_time: bool = False
    autojump: bool = False
    """Virtual time that drives itself (see the module docstring); implies `virtual_time`."""
    start_time: float = 1_700_000_000.0
    """Where virtual time starts."""
    seed: int | None = 7
    """Seed of the API server's generated names and uids (None: random)."""
    service_cidr: str = "172.20.0.0/16"
    """The cluster's service CIDR, as EKS DescribeCluster reports it (EKS picks 172.20.0.0/16 when the VPC, as the
    emulated one, is in 10.0.0.0/8)."""
    kube_dns_ip: str | None = ""
    """The cluster IP of the Service kube-system/kube-dns: "" for the service CIDR's tenth address (the one EKS gives
    it), None for no such Service (a cluster with a DNS setup of its own)."""
    namespace_lifecycle: bool = False
    """Start with the system namespaces and refuse objects in a missing namespace, as a real cluster does (what
    `karpy-emulator up` serves kubectl); off, tests may seed objects in any namespace."""
    field_managers: bool = False
    """Record every writer's fields in managedFields, as a real API server does (what `karpy-emulator up` serves
    kubectl: `apply --server-side` then conflicts with an edit); see `FakeKubeAPI.field_managers`."""
    api_faults: faults.Mix | None = None
    """API-server faults answered to the clients `Mix.users` names (the controller's), from the start; None: none.
    The layer is `api.fault_layer` (a test may turn it off: `enabled = False`)."""
    crd_admission: bool = True
    """Whether the API server refuses NodePools, NodeClaims and EC2NodeClasses karpy's CRDs refuse. Off, it stores
    them as a cluster running other CRDs (an older or newer upstream) may: what karpy must read, or leave alone."""


class EmulatedCluster:
    def __init__(self, options: ClusterOptions | None = None, *, workdir: pathlib.Path | None = None) -> None:
        self.options = options or ClusterOptions()
        self.clock: karpy_clock.Clock
        if self.options.autojump:
            self.clock = autojump.AutojumpClock(self.options.start_time)
        elif self.options.virtual_time:
            self.clock = karpy_clock.ManualClock(self.options.start_time)
        else:
            self.clock = karpy_clock.SystemClock()
        self._driving = contextlib.AsyncExitStack()
        self._workdir = workdir
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._moto: ThreadedMotoServer | None = None
        self._kube: runner.KubeAPIRunner | None = None
        self._client: rest.RestClient | None = None
        self._environment = AWSEnvironment()
        self._tasks: list[asyncio.Task[None]] = []
        self._werkzeug_level = logging.NOTSET
        self.aws_endpoint_url = ""
        self.kubeconfig = pathlib.Path()
        self.seeded: seeding.Seeded | None = None
        self.kubelet: kubelet.Kubelet | None = None
        self.scheduler: kube_scheduler.KubeScheduler | None = None
        self.workloads: workloads.WorkloadController | None = None
        self.pdbs: pdbs.DisruptionController | None = None
        self.garbage: garbage.GarbageCollector | None = None
        self.taints: taint_manager.TaintManager | None = None

    # -- what the controller needs -------------------------------------------------------------------------------

    @property
    def cluster_name(self) -> str:
        return self.options.cluster_name

    @property
    def region(self) -> str:
        return self.options.region

    @property
    def api_url(self) -> str:
        if self._kube is None:
            raise RuntimeError("the emulated cluster is not running")
        return self._kube.url

    @property
    def queue_name(self) -> str:
        return self._seeded().queue_name

    @property
    def queue_url(self) -> str:
        return self._seeded().queue_url

    @property
    def node_role(self) -> str:
        """The seeded node role, for EC2NodeClasses' `spec.role`."""
        return self._seeded().node_role

    @property
    def aws_env(self) -> Mapping[str, str]:
        """The environment an AWS SDK needs to talk to the emulator."""
        return aws_environment(self.aws_endpoint_url, self.region)

    @property
    def api(self) -> server.FakeKubeAPI:
        """The emulated API server (for assertions from its own thread: `runner.call`)."""
        if self._kube is None:
            raise RuntimeError("the emulated cluster is not running")
        return self._kube.api

    @property
    def reader(self) -> reads.StoreReader:
        """The stand-ins' shared view of the store (`reads`): what a LIST answers, without a request, and the
        store's changes since a revision (`StoreReader.changes`)."""
        if self._kube is None:
            raise RuntimeError("the emulated cluster is not running")
        return reads.StoreReader(self._kube, activity=autojump.activity_of(self.clock))

    @property
    def client(self) -> rest.RestClient:
        """The stand-ins' own client (wall-clock rate limiter), usable by tests and demo scripts."""
        if self._client is None:
            raise RuntimeError("the emulated cluster is not running")
        return self._client

    def _seeded(self) -> seeding.Seeded:
        if self.seeded is None:
            raise RuntimeError("the emulated cluster is not running")
        return self.seeded

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        try:
            await self._start()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    async def _start(self) -> None:
        opts = self.options
        if isinstance(self.clock, autojump.AutojumpClock):
            # First, so that the worker-thread calls below already run on the tracked executor.
            await self._driving.enter_async_context(self.clock.driving())
            # SQS redelivery (visibility timeouts) on virtual time, as the queue's long poll already is.
            self._driving.enter_context(sqs_time.on_clock(self.clock))
        if self._workdir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="karpy-emulated-")
            self._workdir = pathlib.Path(self._tempdir.name)
        from moto.server import ThreadedMotoServer  # lazily: the controller image does not ship moto

        # werkzeug logs every request moto serves at INFO; quiet while the cluster runs, restored by _stop.
        self._werkzeug_level = logging.getLogger("werkzeug").level
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        # moto's CreateFleet ignores a launch template's security groups; EC2 applies them (else every node drifts).
        seeding.install_launch_template_security_groups()
        idempotency.install()  # moto ignores CreateFleet's ClientToken; EC2 honours it
        paging.install()  # moto answers the catalog's describes in one page; EC2 pages them by MaxResults
        serialized.install()  # moto's server runs requests at once on backends that are not thread-safe
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        await asyncio.to_thread(self._moto.start)
        host, port = self._moto.get_host_and_port()
        self.aws_endpoint_url = f"http://{host}:{port}"
        self._environment.apply(self.aws_env)
        await asyncio.to_thread(_reset_moto, self.aws_endpoint_url)
        self.seeded = await asyncio.to_thread(
            seeding.seed,
            region=opts.region,
            cluster_name=opts.cluster_name,
            k8s_version=opts.k8s_version,
            zones=opts.zones,
            service_cidr=opts.service_cidr,
        )
        self._kube = runner.KubeAPIRunner(
            server.FakeKubeAPI(
                seed=opts.seed,
                clock=self.clock.now,
                request_history=2000,
                object_history=20,
                validators=validation.karpenter() if opts.crd_admission else {},
                kubernetes_version=opts.k8s_version,
                namespace_lifecycle=opts.namespace_lifecycle,
                field_managers=opts.field_managers,
                fault_layer=self._fault_layer(),
                activity=autojump.activity_of(self.clock),
            )
        )
        await asyncio.to_thread(self._kube.start)
        self.kubeconfig = self._kube.write_kubeconfig(self._workdir / "kubeconfig")
        # The stand-ins' client limits its rate on the wall clock: a virtual clock would park it until time moves.
        self._client = rest.RestClient(
            credentials.Credentials(self._kube.url),
            clock=karpy_clock.SystemClock(),
            qps=1000.0,
            burst=2000,
            activity=autojump.activity_of(self.clock),
        )
        if opts.kube_dns_ip is not None:
            await self._client.create(kube_resources.SERVICES, kube_dns_service(opts.service_cidr, opts.kube_dns_ip))
        # The stand-ins read one shared view of the store, as a control plane's controllers share informer caches.
        reader = self.reader
        types = await asyncio.to_thread(catalog.load, opts.region)
        self.kubelet = kubelet.Kubelet(
            self._client,
            # moto runs in this process: the kubelet reads its backend instead of describing every instance twice
            # a second (`moto_instances`).
            moto_instances.MotoInstances(region=opts.region, endpoint_url=self.aws_endpoint_url),
            settings=kubelet.KubeletSettings(
                cluster_name=opts.cluster_name,
                region=opts.region,
                boot_delay=opts.boot_delay,
                register_delay=opts.register_delay,
                interval=opts.interval,
                kubelet_version=resources.git_version(opts.k8s_version),
            ),
            clock=self.clock,
            instance_types={t.name: t for t in types},
            reader=reader,
        )
        self.scheduler = kube_scheduler.KubeScheduler(
            self._client,
            clock=self.clock,
            settings=kube_scheduler.SchedulerSettings(
                interval=opts.interval, qps=opts.scheduler_qps or None, burst=opts.scheduler_burst
            ),
            reader=reader,
        )
        self.workloads = workloads.WorkloadController(
            self._client, clock=self.clock, interval=opts.interval, reader=reader
        )
        self.pdbs = pdbs.DisruptionController(self._client, clock=self.clock, interval=opts.interval, reader=reader)
        self.garbage = garbage.GarbageCollector(self._client, clock=self.clock, interval=opts.interval, reader=reader)
        self.taints = taint_manager.TaintManager(self._client, clock=self.clock, interval=opts.interval, reader=reader)
        if opts.autojump or not opts.virtual_time:
            for name, loop in (
                ("kubelet", self.kubelet.run),
                ("kube-scheduler", self.scheduler.run),
                ("workloads", self.workloads.run),
                ("disruption-controller", self.pdbs.run),
                ("garbage-collector", self.garbage.run),
                ("taint-manager", self.taints.run),
            ):
                self._tasks.append(asyncio.create_task(loop(), name=f"emulated-{name}"))

    def _fault_layer(self) -> faults.Faults | None:
        """The API server's fault layer, its slow answers waiting on this cluster's clock (from the server's thread)."""
        mix = self.options.api_faults
        if mix is None:
            return None
        sleep = faults.on_loop(self.clock, asyncio.get_running_loop())
        return faults.Faults(mix, sleep=sleep, activity=autojump.activity_of(self.clock))

    async def _stop(self) -> None:
        errors = await tasks.cancel_and_wait(self._tasks)
        self._tasks.clear()
        if errors:
            raise errors[0]
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._kube is not None:
            await asyncio.to_thread(self._kube.stop)
            self._kube = None
        if self._moto is not None:
            await asyncio.to_thread(self._moto.stop)
            self._moto = None
        self._environment.restore()
        logging.getLogger("werkzeug").setLevel(self._werkzeug_level)
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
            self._workdir = None
        await self._driving.aclose()

    # -- driving -------------------------------------------------------------------------------------------------

    async def step(self) -> None:
        """One pass of each stand-in in causal order: the garbage collector deletes what lost its owner, the taint
        manager what must leave a NoExecute-tainted node, workloads
        make pods, the kubelet makes nodes, the scheduler binds, the kubelet starts what was bound, and the disruption
        controller counts the healthy pods."""
        if (
            self.kubelet is None
            or self.scheduler is None
            or self.workloads is None
            or self.pdbs is None
            or self.garbage is None
            or self.taints is None
        ):
            raise RuntimeError("the emulated cluster is not running")
        await self.garbage.sync()
        await self.taints.sync()
        await self.workloads.sync()
        await self.kubelet.sync()
        await self.scheduler.sync()
        await self.kubelet.sync()
        await self.pdbs.sync()

    async def run_for(self, seconds: float) -> None:
        """Manual virtual time: advance `seconds` in `interval` steps, one `step()` after each. Wall-clock or autojump
        time: sleep on the cluster's clock while the stand-ins run."""
        if not isinstance(self.clock, karpy_clock.ManualClock) or isinstance(self.clock, autojump.AutojumpClock):
            await self.clock.sleep(seconds)
            return
        remaining = seconds
        while remaining > 0:
            delta = min(self.options.interval, remaining)
            await self.clock.run_for(delta)
            await self.step()
            remaining -= delta


MOTO_RESET_TIMEOUT: Final = 60.0
"""Seconds the fresh moto server may take to answer its reset. A bound, not a wait: at a load average of 20 on two
cores its thread, which shares the process with a whole e2e test, took more than 10 s (one test ERROR in setup)."""


def _reset_moto(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=MOTO_RESET_TIMEOUT) as response:
        if response.status != 200:
            raise RuntimeError(f"moto reset answered {response.status}")
