"""Scrape benchmark (not a test): what one Prometheus scrape of karpy's registry costs on a large cluster.

The state cache is fed `--nodes` EKS nodes and `--pods` Deployment pods spread 10 per node (`kube_objects`, the
objects the watch benchmark uses), one NodePool and one NodeClaim per node, so every node is a managed one. Every
collector the controller registers is registered (`Metrics.watch_state`, `watch_cluster_series`); then the registry
is rendered `--runs` times. Figures: `scrape_s` (median wall seconds of one render), `scrape_min_s`,
`scrape_cpu_s` (median CPU seconds of one render, which the load of a shared machine distorts less), `bytes` (size
of one exposition) and `samples` (lines that are samples).

Then the registry is served as the controller serves it (`servers.metrics_app` on 127.0.0.1) and scraped `--runs`
times over HTTP while a ticker task on the same event loop wakes every millisecond: `loop_stall_max_s` is the longest
the loop went without running it during any scrape (what provisioning, disruption, lease renewal and the watches
would have waited), `served_s` the median wall seconds of one served scrape and `served_cpu_s` its median CPU
seconds (the whole process: snapshot, render, HTTP and the client reading the body).

    .venv/bin/python bench/scrape.py --json                      # 50,000 pods, 5,000 nodes
    .venv/bin/python bench/scrape.py --json --pods 5000 --nodes 500
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from typing import Any

import aiohttp

import kube_objects
from karpy import clock
from karpy.kube import client, resources
from karpy.runtime import metrics, servers
from karpy.state import cluster

START = 1_735_689_600.0


def _nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "uid": "pool-uid"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                         "name": "default"}, "requirements": []}}},
    }  # fmt: skip


def _nodeclaim(node: dict[str, Any], i: int) -> dict[str, Any]:
    name = f"default-{i:06d}"
    node["spec"] = {**node.get("spec", {}), "providerID": f"aws:///us-east-1a/i-{i:017x}"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "uid": f"claim-{i}", "labels": dict(node["metadata"]["labels"])},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
        "status": {"providerID": node["spec"]["providerID"], "nodeName": node["metadata"]["name"],
                   "capacity": node["status"]["capacity"], "allocatable": node["status"]["allocatable"],
                   "conditions": [{"type": t, "status": "True", "reason": t, "message": "",
                                   "lastTransitionTime": "2025-01-01T00:00:00Z"}
                                  for t in ("Launched", "Registered", "Initialized", "Ready")]},
    }  # fmt: skip


def populated(pods: int, nodes: int) -> cluster.Cluster:
    state = cluster.Cluster(clock=clock.ManualClock(START))
    for res in (resources.NODEPOOLS, resources.NODECLAIMS, resources.NODES, resources.PODS):
        state.mark_listed(res)
    state.apply(resources.NODEPOOLS, client.WatchEvent(client.ADDED, _nodepool()))
    i = 0
    for kind, obj in kube_objects.cluster_objects(pods, nodes):
        if kind == "nodes":
            state.apply(resources.NODECLAIMS, client.WatchEvent(client.ADDED, _nodeclaim(obj, i)))
            state.apply(resources.NODES, client.WatchEvent(client.ADDED, obj))
            i += 1
        else:
            state.apply(resources.PODS, client.WatchEvent(client.ADDED, obj))
    return state


TICK_S = 0.001


async def _ticking(gaps: list[float]) -> None:
    """Wake every TICK_S seconds and record how late each wake-up came (the loop was busy elsewhere)."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    while True:
        await asyncio.sleep(TICK_S)
        now = loop.time()
        gaps.append(max(0.0, now - last - TICK_S))
        last = now


async def served(m: metrics.Metrics, runs: int) -> dict[str, float]:
    """Scrape `m` `runs` times over HTTP as the controller serves it, with a ticker on the serving loop."""
    app = servers.metrics_app(m.scrape)
    times, cpu, stalls = [], [], []
    async with servers.serving(app, host="127.0.0.1", port=0) as port, aiohttp.ClientSession() as session:
        for _ in range(runs):
            gaps: list[float] = []
            ticker = asyncio.create_task(_ticking(gaps))
            await asyncio.sleep(TICK_S * 5)
            start, start_cpu = time.perf_counter(), time.process_time()
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                await response.read()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            stalls.append(max(gaps, default=0.0))
    return {
        "loop_stall_max_s": round(max(stalls), 3),
        "loop_stall_median_s": round(statistics.median(stalls), 3),
        "served_s": round(statistics.median(times), 3),
        "served_cpu_s": round(statistics.median(cpu), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    state = populated(args.pods, args.nodes)
    m = metrics.Metrics()
    m.watch_state(state)
    m.watch_cluster_series(state, now=lambda: START + 3600)
    times, cpu, body = [], [], b""
    for _ in range(args.runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        body = m.exposition()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    result = {
        "nodes": args.nodes,
        "pods": args.pods,
        "runs": args.runs,
        "scrape_s": round(statistics.median(times), 3),
        "scrape_min_s": round(min(times), 3),
        "scrape_cpu_s": round(statistics.median(cpu), 3),
        "bytes": len(body),
        "samples": len(lines),
        **asyncio.run(served(m, args.runs)),
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
