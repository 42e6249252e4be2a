"""An `EmulatedCluster` in its own process, for measuring the controller apart from the emulation.

In a real deployment the controller is a process of its own, while EC2 and the API server, the kubelets and the
scheduler run elsewhere. In one Python process they would share one interpreter lock, and a benchmark of the
controller would measure the emulator. `RemoteCluster` starts `python -m karpy_emulator.remote` (which runs an
`EmulatedCluster` and prints where it listens as one JSON line) and offers what `controlplane.ControlPlane` needs:

    async with remote.RemoteCluster(cluster.ClusterOptions(boot_delay=0.0)) as emulated:
        async with controlplane.ControlPlane(emulated):
            ...

The child stops when its stdin closes (the parent exited or left the block), so it never outlives the parent.
While the block runs, the AWS variables of `aws_env` are set in `os.environ` for the parent's boto3 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from karpy import clock as karpy_clock
from karpy import tasks
from karpy.kube import credentials, rest
from karpy_emulator import cluster, profiling

START_TIMEOUT = 120.0
"""Seconds for the child to seed moto and start serving."""
STOP_TIMEOUT = 30.0
"""Seconds for the child to stop cleanly once its stdin closed, before it is killed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the child's emulation listens (its one JSON line)."""

    api_url: str
    aws_endpoint_url: str
    queue_name: str
    queue_url: str
    node_role: str
    pid: int


def _arguments(options: cluster.ClusterOptions) -> list[str]:
    return [
        f"--cluster-name={options.cluster_name}",
        f"--region={options.region}",
        f"--k8s-version={options.k8s_version}",
        f"--zones={options.zones}",
        f"--boot-delay={options.boot_delay}",
        f"--register-delay={options.register_delay}",
        f"--interval={options.interval}",
        f"--scheduler-qps={options.scheduler_qps}",
        f"--scheduler-burst={options.scheduler_burst}",
    ]


class RemoteCluster:
    """The attributes `controlplane.ControlPlane` reads from an `EmulatedCluster`, served by a child process."""

    def __init__(self, options: cluster.ClusterOptions | None = None) -> None:
        self.options = options or cluster.ClusterOptions()
        if self.options.virtual_time:
            raise ValueError("options.virtual_time: a cluster in another process cannot share a virtual clock")
        self.clock: karpy_clock.Clock = karpy_clock.SystemClock()
        self._process: asyncio.subprocess.Process | None = None
        self._endpoints: Endpoints | None = None
        self._client: rest.RestClient | None = None
        self._environment = cluster.AWSEnvironment()

    @property
    def endpoints(self) -> Endpoints:
        if self._endpoints is None:
            raise RuntimeError("the remote cluster is not running")
        return self._endpoints

    @property
    def cluster_name(self) -> str:
        return self.options.cluster_name

    @property
    def region(self) -> str:
        return self.options.region

    @property
    def api_url(self) -> str:
        return self.endpoints.api_url

    @property
    def queue_name(self) -> str:
        return self.endpoints.queue_name

    @property
    def aws_env(self) -> Mapping[str, str]:
        return cluster.aws_environment(self.endpoints.aws_endpoint_url, self.region)

    @property
    def client(self) -> rest.RestClient:
        if self._client is None:
            raise RuntimeError("the remote cluster is not running")
        return self._client

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
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "karpy_emulator.remote",
            *_arguments(self.options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), timeout=START_TIMEOUT)
        if not line:
            code = await asyncio.wait_for(self._process.wait(), timeout=STOP_TIMEOUT)
            raise RuntimeError(f"the emulated cluster process exited with {code} before it was ready")
        self._endpoints = Endpoints(**json.loads(line))
        self._environment.apply(self.aws_env)
        self._client = rest.RestClient(
            credentials.Credentials(self.api_url), clock=karpy_clock.SystemClock(), qps=1000.0, burst=2000
        )

    async def _stop(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), timeout=STOP_TIMEOUT)
            except TimeoutError:
                process.kill()
                await process.wait()
        self._environment.restore()


# --- the child ---------------------------------------------------------------------------------------------------


def _options(argv: list[str] | None) -> cluster.ClusterOptions:
    parser = argparse.ArgumentParser(prog="python -m karpy_emulator.remote", description="serve an EmulatedCluster")
    parser.add_argument("--cluster-name", default="karpy-demo")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--k8s-version", default="1.31")
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--boot-delay", type=float, default=5.0)
    parser.add_argument("--register-delay", type=float, default=0.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--scheduler-qps", type=float, default=cluster.ClusterOptions().scheduler_qps)
    parser.add_argument("--scheduler-burst", type=int, default=cluster.ClusterOptions().scheduler_burst)
    args = parser.parse_args(argv)
    return cluster.ClusterOptions(
        cluster_name=args.cluster_name,
        region=args.region,
        k8s_version=args.k8s_version,
        zones=args.zones,
        boot_delay=args.boot_delay,
        register_delay=args.register_delay,
        interval=args.interval,
        scheduler_qps=args.scheduler_qps,
        scheduler_burst=args.scheduler_burst,
    )


async def serve(options: cluster.ClusterOptions) -> None:
    """Run the cluster, announce it on stdout, stop when stdin reaches its end."""
    async with cluster.EmulatedCluster(options) as emulated:
        assert emulated.seeded is not None
        endpoints = Endpoints(
            api_url=emulated.api_url,
            aws_endpoint_url=emulated.aws_endpoint_url,
            queue_name=emulated.queue_name,
            queue_url=emulated.queue_url,
            node_role=emulated.seeded.node_role,
            pid=os.getpid(),
        )
        sys.stdout.write(json.dumps(dataclasses.asdict(endpoints)) + "\n")
        sys.stdout.flush()
        # A blocking read of stdin in a worker thread: returns at EOF, when the parent closed the pipe or died.
        await asyncio.to_thread(sys.stdin.buffer.read)


def main(argv: list[str] | None = None) -> int:
    # KARPY_EMULATOR_PROFILE (module `profiling`): where a benchmark's emulation spends its CPU, every thread.
    # The collector tuned as the controller's process is (`karpy.tasks.COLLECTOR_THRESHOLDS`): the API server's store
    # keeps every object of the cluster alive and each write allocates a new version of one, so with CPython's
    # thresholds the collections that scan the store again took 2.6 s of 12 to 13 s of CPU in
    # bench/kube_scheduler_cpu.py's 3,000 pods, with these 1.0 to 1.2 s (`gc_cpu_s`).
    with profiling.from_environment(), tasks.collector_tuned(), contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(_options(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
