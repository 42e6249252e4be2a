"""`KarpyRun`: `karpy run` in a process of its own against a `RemoteCluster`, measured as upstream measures its pod
(the process's RSS and CPU), warmed up before a benchmark's phases, stopped by SIGTERM as the kubelet stops it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from tests import polling

from karpy.kube import resources, rest
from karpy_emulator import cluster, demo, remote, remote_controller, workloads

HOLD = 64
"""MB the child below holds."""
SPIN = 0.3
"""CPU seconds the child below spends before it waits."""
CHILD = f"""
import sys, time
held = bytearray({HOLD} * 2**20)
start = time.process_time()
while time.process_time() - start < {SPIN}:
    pass
rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
print(rss / 1024, time.process_time(), flush=True)
sys.stdin.read()
"""


def test_rss_and_cpu_are_the_named_process_s_not_this_one_s() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        own_rss, own_cpu = map(float, child.stdout.readline().split())  # as the idle child itself read them
        held, spent = remote_controller.rss_mb(child.pid), remote_controller.cpu_s(child.pid)
        peak = remote_controller.rss_mb(child.pid, "VmHWM")
        child.stdin.close()
    assert own_rss >= HOLD
    assert held == pytest.approx(own_rss, abs=1.0)
    assert peak >= held
    assert spent == pytest.approx(own_cpu, abs=0.1)  # clock ticks are 10 ms; the idle child spends nothing more
    with pytest.raises(LookupError, match="NoSuchField"):
        remote_controller.rss_mb("self", "NoSuchField")


@pytest.mark.slow
async def test_karpy_run_warms_up_provisions_and_stops_cleanly(tmp_path: pathlib.Path) -> None:
    options = cluster.ClusterOptions(cluster_name="karpy-run-remote", boot_delay=0.0, interval=0.5)
    async with remote.RemoteCluster(options) as emulated:
        api = emulated.client
        nodeclass = demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name)
        await api.create(resources.EC2NODECLASSES, nodeclass)
        await api.create(resources.NODEPOOLS, demo.nodepool_manifest(consolidate_after="30s"))
        async with remote_controller.KarpyRun(emulated, workdir=tmp_path) as ctrl:
            assert ctrl.pid not in {os.getpid(), emulated.endpoints.pid}
            await ctrl.warm_up(api, within=300.0)
            # Read once the child has answered: the kernel lets the parent go on (close-on-exec) before it has set
            # up the new image's arguments, so a read right after the spawn can find an empty cmdline.
            assert _command(ctrl.pid)[1:4] == ["-m", "karpy.cli", "run"]
            assert await ctrl.solves() >= 1  # the warm-up pod's pass listed the catalog
            assert await api.get(resources.PODS, remote_controller.WARM_UP_POD, namespace="default") is None
            assert (await api.list(resources.NODECLAIMS))[0] == []  # and placed nothing
            await api.create(workloads.DEPLOYMENTS, demo.inflate_manifest(1, requests={"cpu": "1"}))
            await polling.until(lambda: _bound(api, ctrl), every=0.5)
            assert ctrl.rss_mb() > 0
            assert ctrl.cpu_s() > 0
            assert await ctrl.stop() == 0  # SIGTERM: a clean stop
        log = (tmp_path / remote_controller.LOG).read_text()
    assert log.startswith("{")  # the JSON log of `karpy run`, as a pod's container log
    assert '"level":"error"' not in log, log[-3000:]


def _command(pid: int) -> list[str]:
    return pathlib.Path(f"/proc/{pid}/cmdline").read_text().split("\0")


async def _bound(api: rest.RestClient, ctrl: remote_controller.KarpyRun) -> bool:
    ctrl.check()  # an exited controller fails the test with its log
    pods, _ = await api.list(resources.PODS, namespace="default")
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)
