"""What one request costs the emulated API server, per kind of request (not a test).

A `FakeKubeAPI` is served on its own thread (`karpy_emulator.apiserver.runner.KubeAPIRunner`) with one watch of every
pod open, as the controller holds. `--requests` requests of each kind go out from 8 concurrent aiohttp clients: a
pod's create, GET, status merge patch, strategic merge patch of its labels, binding, and (a quarter as many) the first
page of 50 pods of a LIST. `server_cpu_ms` is the server thread's CPU per request (user + system, from
/proc/self/task/<tid>/stat), which the load of the shared machine distorts less than wall time; `wall_s` is the
wall clock of the whole batch.

    .venv/bin/python bench/apiserver_requests.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from karpy_emulator.apiserver import runner, server

CONCURRENCY = 8
PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}


def _pod(index: int) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi"}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{index}", "namespace": "default", "labels": {"app": "x"}, "ownerReferences": [owner]},
        "spec": {
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": requests}}],
            "tolerations": [{"key": f"k{n}", "operator": "Exists"} for n in range(3)],
        },
    }


def _thread_cpu(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _expect(response: aiohttp.ClientResponse, status: int) -> None:
    body = await response.read()
    if response.status != status:
        raise RuntimeError(f"{response.method} {response.url}: {response.status} {body[:200]!r}")


async def _measure(tid: int, count: int, one: Callable[[int], Awaitable[None]]) -> dict[str, float]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def gated(index: int) -> None:
        async with gate:
            await one(index)

    cpu, wall = _thread_cpu(tid), time.monotonic()
    await asyncio.gather(*(gated(index) for index in range(count)))
    used = _thread_cpu(tid) - cpu
    return {
        "requests": count,
        "server_cpu_ms": round(1e3 * used / count, 3),
        "wall_s": round(time.monotonic() - wall, 2),
    }


async def run(count: int) -> dict[str, dict[str, float]]:
    api = server.FakeKubeAPI(seed=1, request_history=1000, object_history=2)
    async with runner.KubeAPIRunner(api) as kube, aiohttp.ClientSession(headers={"Authorization": "Bearer t"}) as s:
        tid = await kube.read(threading.get_native_id)  # read on the server's own loop: its thread
        base = kube.url

        async def create(i: int) -> None:
            async with s.post(f"{base}{PODS}", json=_pod(i)) as response:
                await _expect(response, 201)

        async def get(i: int) -> None:
            async with s.get(f"{base}{PODS}/p{i}") as response:
                await _expect(response, 200)

        async def status(i: int) -> None:
            running = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
            async with s.patch(f"{base}{PODS}/p{i}/status", data=json.dumps(running), headers=MERGE) as response:
                await _expect(response, 200)

        async def label(i: int) -> None:
            labelled = {"metadata": {"labels": {"k": str(i)}}}
            async with s.patch(f"{base}{PODS}/p{i}", data=json.dumps(labelled), headers=STRATEGIC) as response:
                await _expect(response, 200)

        async def bind(i: int) -> None:
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"p{i}"}}
            binding["target"] = {"kind": "Node", "name": "n1"}
            async with s.post(f"{base}{PODS}/p{i}/binding", json=binding) as response:
                await _expect(response, 201)

        async def page(_: int) -> None:
            async with s.get(f"{base}{PODS}", params={"limit": "50"}) as response:
                await _expect(response, 200)

        async def watch() -> None:
            async with s.get(f"{base}/api/v1/pods", params={"watch": "true"}) as response:
                async for _ in response.content:
                    pass

        watcher = asyncio.create_task(watch())
        try:
            kinds = [("create", create), ("get", get), ("status_patch", status), ("strategic_patch", label)]
            kinds += [("bind", bind)]
            results = {name: await _measure(tid, count, one) for name, one in kinds}
            results["list_page_of_50"] = await _measure(tid, max(1, count // 4), page)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await watcher
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--requests", type=int, default=2000, help="requests of each kind")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.requests))
    results_with_load = {**results, "loadavg": list(os.getloadavg())}
    if args.json:
        print(json.dumps(results_with_load))
    else:
        for name, figures in results.items():
            print(f"{name:18s} {figures['server_cpu_ms']:8.3f} ms/request  ({figures['wall_s']} s wall)")
        print(f"load average {results_with_load['loadavg']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
