"""`karpy-emulator up`: a local EKS cluster to drive with the real kubectl, until Ctrl-C or SIGTERM.

The emulated cluster of the demo and the e2e tests (`cluster.EmulatedCluster`: moto for AWS, the emulated API
server with its kubelet, kube-scheduler, workload, PDB, garbage-collector and taint-manager stand-ins), a managed
node group's system nodes, and, unless `controller=False`, the karpy controller as `karpy run` builds it
(`controlplane.ControlPlane`). It writes a kubeconfig whose context is named for the cluster and prints what a user
needs: the kubeconfig, and the environment to run `karpy run` (or `karpy simulate`) against it themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import signal
from collections.abc import Callable
from typing import TextIO

import yaml

from karpy.kube import resources
from karpy_emulator import cluster, controlplane, kubelet
from karpy_emulator.aws import seeding


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    cluster_name: str = "karpy-local"
    region: str = "us-east-1"
    zones: int = 3
    system_nodes: int = 2
    """Nodes of an EKS managed node group (`eks.amazonaws.com/nodegroup: system`), not karpy's."""
    controller: bool = True
    kubeconfig: pathlib.Path | None = None
    """Where the kubeconfig goes; None: `<cluster name>.kubeconfig` in the working directory."""
    boot_delay: float = 2.0
    """Seconds from a node's registration to Ready."""

    def kubeconfig_path(self) -> pathlib.Path:
        return self.kubeconfig if self.kubeconfig is not None else pathlib.Path(f"{self.cluster_name}.kubeconfig")


def kubeconfig(*, server: str, context: str, user: str) -> dict[str, object]:
    """A kubeconfig with one context, `context`, for the emulated API server at `server` (no TLS, a bearer token
    nothing checks)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": user, "user": {"token": user}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user, "namespace": "default"}}],
        "current-context": context,
    }


def banner(options: Options, emulated: cluster.EmulatedCluster, path: pathlib.Path) -> list[str]:
    lines = [
        f"cluster {options.cluster_name} is up (Kubernetes v{emulated.options.k8s_version}, {options.region}, "
        f"{options.zones} zones, {options.system_nodes} system nodes, "
        f"karpy {'running' if options.controller else 'not running: --no-controller'})",
        f"kubeconfig: {path.resolve()} (context {options.cluster_name})",
        f"  export KUBECONFIG={path.resolve()}",
        "  kubectl get nodes",
    ]
    if not options.controller:
        env = {
            **emulated.aws_env,
            "CLUSTER_NAME": emulated.cluster_name,
            "INTERRUPTION_QUEUE": emulated.queue_name,
        }
        lines += ["run the controller yourself with:", "  " + " ".join(f"{k}={v}" for k, v in env.items())]
        lines.append(f"  KUBECONFIG={path.resolve()} karpy run")
    lines.append(f"EC2NodeClass spec.role: {emulated.node_role}; subnets and security groups tagged "
                 f"karpenter.sh/discovery={emulated.cluster_name}")  # fmt: skip
    lines.append("Ctrl-C stops it")
    return lines


async def serve(
    options: Options,
    *,
    out: TextIO,
    stop: asyncio.Event,
    ready: Callable[[cluster.EmulatedCluster], None] | None = None,
) -> None:
    """Run the cluster until `stop` is set; `ready` is called once it serves (tests drive it from there)."""
    emulated_options = cluster.ClusterOptions(
        cluster_name=options.cluster_name,
        region=options.region,
        zones=options.zones,
        boot_delay=options.boot_delay,
        interval=0.5,
        namespace_lifecycle=True,
        field_managers=True,
    )
    path = options.kubeconfig_path()
    async with cluster.EmulatedCluster(emulated_options) as emulated:
        assert emulated.seeded is not None
        await asyncio.to_thread(seeding.launch_system_nodes, emulated.seeded, options.system_nodes)
        await _system_nodes_ready(emulated, options.system_nodes)
        config = kubeconfig(server=emulated.api_url, context=options.cluster_name, user="admin")
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        async with contextlib.AsyncExitStack() as running:
            if options.controller:
                await running.enter_async_context(controlplane.ControlPlane(emulated))
            out.write("\n".join(banner(options, emulated, path)) + "\n")
            out.flush()
            if ready is not None:
                ready(emulated)
            await stop.wait()
    out.write(f"cluster {options.cluster_name} stopped\n")


SYSTEM_NODES_TIMEOUT = 60.0
"""Seconds `up` waits for its system nodes to be Ready before it reports the cluster up."""


async def _system_nodes_ready(emulated: cluster.EmulatedCluster, count: int) -> None:
    """Wait, bounded, until the kubelet stand-in registered the system nodes and they are Ready."""
    deadline = emulated.clock.now() + SYSTEM_NODES_TIMEOUT
    while True:
        nodes, _ = await emulated.client.list(resources.NODES)
        if sum(1 for node in nodes if kubelet.is_ready(node)) >= count:
            return
        if emulated.clock.now() > deadline:
            raise TimeoutError(f"{count} system nodes were not Ready within {SYSTEM_NODES_TIMEOUT:.0f} s")
        await emulated.clock.sleep(emulated.options.interval)


def main(options: Options, *, out: TextIO) -> int:
    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await serve(options, out=out, stop=stop)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    asyncio.run(run())
    return 0
