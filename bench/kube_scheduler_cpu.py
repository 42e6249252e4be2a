"""The kube-scheduler stand-in's CPU per pod on a fixed scale-out (not a test).

`bench/e2e.py` shows when the stand-in paces the pods, but its figures move with the machine's load and with the
controller's timing. Here the stand-in (`karpy_emulator.kube_scheduler.KubeScheduler`) runs alone against the
emulated API server (in this process, on its own thread), reading its store as the emulation does (`reads.StoreReader`),
on a `ManualClock`, on the same input every time:

- `--pods` pending pods in upstream's performance-suite mix (half 0.9 CPU / 3.1 Gi, half 3.5 CPU / 28 Gi, each half
  one ReplicaSet's pods, as `bench/e2e.py` creates them);
- one pass a virtual second, its client limited to `--qps` requests a second (burst 100, as kube-scheduler's);
- from the `--nodes-after`th second, `--nodes-per-second` r5.8xlarge nodes join each second, as Karpenter's do:
  created NotReady with the `karpenter.sh/unregistered` taint, then Ready and untainted the next second, until the
  pods' lower bound of nodes (a tenth more, and one) is there.

The run ends when every pod is bound. `cpu_s` is the process time of the whole run (the stand-in's passes, its
requests and the API server's answers to them, and the benchmark's own node writes), `cpu_ms_per_pod` that over the
pods, `standin_cpu_s` the main thread's share (the stand-in and its client, and the benchmark's own writes:
`time.thread_time`), `passes_cpu_s` (and `passes_cpu_ms_per_pod`) the main thread's time inside the stand-in's
passes alone (its reads, placement, messages, and its client's side of its binds and condition writes), `passes` and
`virtual_s` how many passes and virtual seconds it took, `last_marked_s` the virtual second of the last
Unschedulable condition write, `gc_cpu_s` the cyclic collector's share of `cpu_s` (its collections' thread CPU
time, `gc.callbacks`). The run uses the collector's thresholds of the emulation's process (`karpy_emulator.remote`,
`karpy.tasks.COLLECTOR_THRESHOLDS`); `--default-collector` keeps CPython's, to compare. Compare two trees by running
each tree's copy in turn:

    .venv/bin/python bench/kube_scheduler_cpu.py --json --pods 3000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import threading
import time
from typing import Any

from karpy import clock as karpy_clock
from karpy import tasks
from karpy.kube import credentials, resources, rest
from karpy_emulator import kube_scheduler, reads
from karpy_emulator.apiserver import runner, server

START = 1_700_000_000.0
NODE_CPU_M = 31_850
NODE_MEMORY_MI = 248 * 1024
SHAPES = (("small", "900m", "3174Mi", 900, 3174), ("large", "3500m", "28Gi", 3500, 28 * 1024))
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def pod(shape: str, i: int, cpu: str, memory: str) -> dict[str, Any]:
    replicaset = f"{shape}-6d8f7c9b5"
    requests = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{replicaset}-{i:05d}",
            "namespace": "default",
            "labels": {"app": shape, "pod-template-hash": "6d8f7c9b5"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset, "uid": f"uid-{shape}"}
            ],
        },
        "spec": {"containers": [{"name": "app", "image": "pause", "resources": {"requests": requests}}]},
    }


def node(i: int) -> dict[str, Any]:
    name = f"ip-10-0-{i // 250}-{i % 250}.ec2.internal"
    zone = f"us-east-1{'abc'[i % 3]}"
    node_labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    node_labels.update({"node.kubernetes.io/instance-type": "r5.8xlarge", "karpenter.sh/nodepool": "default"})
    allocatable = {"cpu": f"{NODE_CPU_M}m", "memory": f"{NODE_MEMORY_MI}Mi", "pods": "234"}
    not_ready = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"taints": [UNREGISTERED]},
        "status": {"allocatable": allocatable, "conditions": not_ready},
    }


class CollectorTime:
    """The cyclic collector's CPU seconds (thread time) since `start`, over every thread, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._counting = False
        self._began: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began[threading.get_ident()] = time.thread_time()
        elif (began := self._began.pop(threading.get_ident(), None)) is not None and self._counting:
            self.seconds += time.thread_time() - began

    def start(self) -> None:
        self.seconds, self._counting = 0.0, True

    def stop(self) -> float:
        self._counting = False
        return self.seconds


def nodes_needed(pods: int) -> int:
    """The pods' lower bound of nodes (by CPU and by memory), a tenth more and one for the packing's slack."""
    per_shape = [(pods + 1 - k) // 2 for k in range(2)]
    cpu = sum(n * s[3] for n, s in zip(per_shape, SHAPES, strict=True))
    memory = sum(n * s[4] for n, s in zip(per_shape, SHAPES, strict=True))
    return math.ceil(1.1 * max(cpu / NODE_CPU_M, memory / NODE_MEMORY_MI)) + 1


async def run(pods: int, *, qps: float, nodes_after: int, nodes_per_second: int, limit_s: int) -> dict[str, Any]:
    collector = CollectorTime()
    gc.callbacks.append(collector)
    try:
        return await _run(
            pods, collector, qps=qps, nodes_after=nodes_after, nodes_per_second=nodes_per_second, limit_s=limit_s
        )
    finally:
        gc.callbacks.remove(collector)


async def _run(
    pods: int, collector: CollectorTime, *, qps: float, nodes_after: int, nodes_per_second: int, limit_s: int
) -> dict[str, Any]:
    clock = karpy_clock.ManualClock(START)
    settings = kube_scheduler.SchedulerSettings(qps=qps or None)
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, clock=clock.now)) as kube:
        async with rest.RestClient(credentials.Credentials(kube.url), clock=karpy_clock.SystemClock()) as api:
            for i in range(pods):
                shape, cpu_request, memory_request, _, _ = SHAPES[i % 2]
                await api.create(resources.PODS, pod(shape, i, cpu_request, memory_request))
            standin = kube_scheduler.KubeScheduler(api, clock=clock, settings=settings, reader=reads.StoreReader(kube))
            target = nodes_needed(pods)
            joined = 0
            bound = 0
            passes = 0
            last_marked = 0.0
            second = 0
            passes_cpu = 0.0
            cpu0, thread0 = time.process_time(), time.thread_time()
            collector.start()
            for second in range(limit_s):
                if second >= nodes_after:
                    for i in range(max(0, joined - nodes_per_second), joined):  # last second's: Ready, untainted
                        name = node(i)["metadata"]["name"]
                        await api.patch(resources.NODES, name, {"spec": {"taints": []}})
                        ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
                        await api.patch(resources.NODES, name, {"status": ready}, subresource="status")
                    for i in range(joined, min(target, joined + nodes_per_second)):
                        await api.create(resources.NODES, node(i))
                    joined = min(target, joined + nodes_per_second)
                before = time.thread_time()
                report = await standin.sync()
                passes_cpu += time.thread_time() - before
                passes += 1
                bound += len(report.bound)
                if report.unschedulable:
                    last_marked = float(second)
                if bound >= pods:
                    break
                clock.advance(1.0)
            cpu, thread = time.process_time() - cpu0, time.thread_time() - thread0
            collected = collector.stop()
    return {
        "pods": pods,
        "bound": bound,
        "nodes": joined,
        "qps": qps,
        "passes": passes,
        "virtual_s": float(second),
        "last_marked_s": last_marked,
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_pod": round(1000 * cpu / pods, 3),
        "standin_cpu_s": round(thread, 3),
        "passes_cpu_s": round(passes_cpu, 3),
        "passes_cpu_ms_per_pod": round(1000 * passes_cpu / pods, 3),
        "gc_cpu_s": round(collected, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--qps", type=float, default=400.0, help="the stand-in's client rate (0: no limit)")
    parser.add_argument("--nodes-after", type=int, default=5, help="virtual seconds before the first node joins")
    parser.add_argument("--nodes-per-second", type=int, default=20)
    parser.add_argument("--limit-s", type=int, default=3600, help="virtual seconds before giving up")
    parser.add_argument("--default-collector", action="store_true", help="CPython's collector thresholds")
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    options = {name: getattr(args, name) for name in ("qps", "nodes_after", "nodes_per_second", "limit_s")}
    with contextlib.nullcontext() if args.default_collector else tasks.collector_tuned():
        thresholds = list(gc.get_threshold())
        result = asyncio.run(run(args.pods, **options))
    result["collector_thresholds"] = thresholds
    # The machine is shared: the load average says how far the figures are other processes' turns.
    result.update(loadavg_before=load_before, loadavg_after=[round(x, 2) for x in os.getloadavg()])
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
