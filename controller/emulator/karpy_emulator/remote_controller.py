"""`karpy run` in a process of its own against a `remote.RemoteCluster`: the controller measured as upstream's
performance suite measures its pod (test/pkg/environment/common/monitor.go: the karpenter container's memory and
CPU), not beside the code that measures it.

    async with remote.RemoteCluster(options) as emulated, remote_controller.KarpyRun(emulated, workdir=tmp) as ctrl:
        await ctrl.warm_up(emulated.client, within=600.0)
        ctrl.rss_mb(), ctrl.cpu_s()

The child is `python -m karpy.cli run`, the entry point users run, configured through its environment the way
`controlplane.ControlPlane` configures the graph it builds in-process: the emulated API server through a kubeconfig
with the controller's bearer token (`controlplane.CONTROLLER_USER`, so the audit tells its requests apart), moto
through `AWS_ENDPOINT_URL`, an isolated VPC (moto has no price list), no leader election, no interruption queue,
the controller's namespace `default`, its client limits (`Options.qps` / `burst`). Batch windows, the disruption
poll and the validation delay are `karpy run`'s defaults, upstream's, as in `controlplane.Options`. Its JSON log
goes to `workdir/karpy.log`. Leaving the block sends SIGTERM (the kubelet's stop: the controller stops in order)
and kills it if it has not exited within `STOP_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import aiohttp
import yaml
from prometheus_client import parser as prometheus_client_parser

from karpy.api import labels
from karpy.kube import client, resources
from karpy.nodepool import status as nodepool_status
from karpy_emulator import controlplane, remote, up

STOP_TIMEOUT = 60.0
"""Seconds for the controller to stop after SIGTERM before it is killed."""
POLL = 0.5
"""Seconds between looks at the controller's readiness and metrics while it starts and warms up."""
SCHEDULING_DURATION = "karpenter_scheduler_scheduling_duration_seconds"
"""The histogram of the provisioner's solves (core: provisioning/scheduling/metrics.go): one observation per pass."""
WARM_UP_POD = "karpy-catalog-warm-up"
NOWHERE = "catalog-warm-up.none"
"""An instance type no catalog has: the warm-up pod makes the provisioner list the catalog and place nothing."""
LOG = "karpy.log"


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick, closed again at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(
    emulated: remote.RemoteCluster, *, kubeconfig: pathlib.Path, metrics_port: int, health_port: int
) -> dict[str, str]:
    """`karpy run`'s environment for `emulated`, as `controlplane.ControlPlane` configures its graph."""
    opts = controlplane.Options(interruption=False)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/"),
        **emulated.aws_env,
        "KUBECONFIG": str(kubeconfig),
        "CLUSTER_NAME": emulated.cluster_name,
        "ISOLATED_VPC": "true",
        "DISABLE_LEADER_ELECTION": "true",
        "SYSTEM_NAMESPACE": "default",
        "POD_NAME": opts.identity,
        "KUBE_CLIENT_QPS": str(int(opts.qps)),
        "KUBE_CLIENT_BURST": str(opts.burst),
        "METRICS_PORT": str(metrics_port),
        "HEALTH_PROBE_PORT": str(health_port),
    }


def rss_mb(pid: int | str, field: str = "VmRSS") -> float:
    """`field` of /proc/<pid>/status in MB (VmRSS: resident now; VmHWM: its peak)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise LookupError(f"/proc/{pid}/status has no {field}")


def cpu_s(pid: int | str) -> float:
    """CPU seconds (user + system, every thread) process `pid` has used so far (/proc/<pid>/stat utime + stime)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class KarpyRun:
    """`karpy run` as a child process for the length of an `async with` block (see the module docstring)."""

    def __init__(self, emulated: remote.RemoteCluster, *, workdir: pathlib.Path, launcher: Sequence[str] = ()) -> None:
        """`launcher`: what runs the module instead of plain `python -m` (e.g. `python -m cProfile -o F`)."""
        self.emulated = emulated
        self.workdir = workdir
        self.launcher = tuple(launcher) or (sys.executable,)
        self.metrics_port = free_port()
        self.health_port = free_port()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("karpy run is not running")
        return self._process.pid

    @property
    def log_path(self) -> pathlib.Path:
        return self.workdir / LOG

    def rss_mb(self, field: str = "VmRSS") -> float:
        return rss_mb(self.pid, field)

    def cpu_s(self) -> float:
        return cpu_s(self.pid)

    def _prepare(self) -> tuple[dict[str, str], int]:
        """Write the kubeconfig and open the log (blocking, but once and small): the child's environment and the
        log's descriptor, which the child inherits."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.workdir / "kubeconfig"
        config = up.kubeconfig(
            server=self.emulated.api_url, context=self.emulated.cluster_name, user=controlplane.CONTROLLER_USER
        )
        kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        env = environment(
            self.emulated, kubeconfig=kubeconfig, metrics_port=self.metrics_port, health_port=self.health_port
        )
        return env, os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    async def __aenter__(self) -> Self:
        env, log = self._prepare()
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.launcher, "-m", "karpy.cli", "run", env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=log, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
        finally:
            os.close(log)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after `STOP_TIMEOUT`; the exit code (None when it was never started)."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=STOP_TIMEOUT)
            except TimeoutError:
                process.kill()
                await process.wait()
        return process.returncode

    def check(self) -> None:
        """Raise if the controller exited: its code and the end of its log."""
        if self._process is not None and self._process.returncode is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"karpy run exited with {self._process.returncode}; the end of {self.log_path}:\n{tail}")

    async def metrics(self) -> dict[str, Any]:
        """The controller's /metrics, parsed: family name -> `prometheus_client.Metric`."""
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as answer,
        ):
            answer.raise_for_status()
            text = await answer.text()
        return {family.name: family for family in prometheus_client_parser.text_string_to_metric_families(text)}

    async def solves(self) -> int:
        """Provisioning passes that solved (the count of `SCHEDULING_DURATION`)."""
        family = (await self.metrics()).get(SCHEDULING_DURATION)
        if family is None:
            return 0
        return sum(int(s.value) for s in family.samples if s.name == f"{SCHEDULING_DURATION}_count")

    async def warm_up(self, api: client.KubeClient, *, within: float, nodepool: str = "default") -> float:
        """Wait until the controller holds its catalog, as a running controller does (upstream's instance-type
        controller lists types and offerings at start): seconds it took. `nodepool` must exist. Once the NodePool is
        Ready (so the controller has resolved its node class), one pod no instance type can take makes a
        provisioning pass list the NodePool's catalog (moto serialising ~1,400 shapes over HTTP: the emulator's
        cost, not counted in a phase) and place nothing; the pod is deleted before this returns."""
        loop = asyncio.get_running_loop()
        start = loop.time()

        async def until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
            while not await self._answered(check):
                self.check()
                if loop.time() - start > within:
                    raise TimeoutError(f"karpy run: {what} not done after {within:.0f}s")
                await asyncio.sleep(POLL)

        await until("NodePool Ready", lambda: self._pool_ready(api, nodepool))
        before = await self.solves()
        await api.create(resources.PODS, warm_up_pod())
        await until("catalog listed", lambda: self._solved_since(before))
        await api.delete(resources.PODS, WARM_UP_POD, namespace="default")
        await until("warm-up pod gone", lambda: self._pod_gone(api))
        return loop.time() - start

    async def _answered(self, check: Callable[[], Awaitable[bool]]) -> bool:
        try:
            return await check()
        except (OSError, TimeoutError, aiohttp.ClientError, client.KubeError):
            return False  # not serving yet, or a busy API server: ask again

    async def _solved_since(self, before: int) -> bool:
        return await self.solves() > before

    async def _pool_ready(self, api: client.KubeClient, name: str) -> bool:
        pool = await api.get(resources.NODEPOOLS, name) or {}
        conditions = (pool.get("status") or {}).get("conditions") or ()
        return any(c.get("type") == nodepool_status.READY and c.get("status") == "True" for c in conditions)

    async def _pod_gone(self, api: client.KubeClient) -> bool:
        return await api.get(resources.PODS, WARM_UP_POD, namespace="default") is None


def warm_up_pod() -> Mapping[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": WARM_UP_POD, "namespace": "default"},
        "spec": {
            "nodeSelector": {labels.LABEL_INSTANCE_TYPE: NOWHERE},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "pause", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }
