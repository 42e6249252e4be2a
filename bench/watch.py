"""Watch benchmark: what one watch per resource costs the controller, fed three ways (not a test).

The emulated API server (`karpy_emulator.apiserver.server.FakeKubeAPI`) runs in a child process, seeded directly in its
store with `--pods` pods (10 per node, a Deployment's pod as the API server returns it, ~3 KB of JSON) and `--nodes`
nodes (an EKS node with its labels, conditions and image list, ~5 KB). Each consumer runs in a child process of its own,
so that its RSS and CPU time are its alone, and feeds a `karpy.state.cluster.Cluster` from one watch of pods and one of
nodes:

* `informer`: `karpy.state.informer.run_informers` over `karpy.kube.rest.RestClient` (LIST in pages, then WATCH);
* `kopf-event`: `kopf.operator` with one `@kopf.on.event` handler per resource calling `Cluster.apply`;
* `kopf-index`: the same, but listed objects enter the cache through `@kopf.index` handlers (returning nothing, so
  Kopf stores no copy), deletions through `@kopf.on.event`; Kopf holds every non-index handler until all indices
  are populated, and `handlers_released_s` is when the first one ran.

Figures per consumer: `sync_s` (start → every listed object applied to the cache, wall clock), `sync_cpu_s` (the
consumer's CPU time for it, which the load of the shared machine distorts less), `rss_synced_mb` (VmRSS then),
`rss_peak_mb` (VmHWM over the whole run), `baseline_rss_mb` (after imports, before the first request); then the
consumer is stopped (SIGSTOP), the server changes `--churn` pods (a label and a status condition, as a kubelet's
status update does), the consumer resumes and `events_per_s` is the rate at which it applied them (first to last
event, wall clock; `events_per_cpu_s` per CPU second). `watch_requests` and `list_requests` count, per resource,
what the server received from that consumer (one watch per resource is the goal).

    .venv/bin/python bench/watch.py --json                                  # 50,000 pods, 5,000 nodes
    .venv/bin/python bench/watch.py --json --pods 5000 --nodes 500 --variants informer
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import kube_objects

VARIANTS = ("informer", "kopf-event", "kopf-index")
PAGE = 500
"""Objects per LIST page, for the informer and Kopf alike (Kopf's `settings.watching.chunk_size`)."""
SYNC_TIMEOUT = 1800.0
CHURN_TIMEOUT = 1800.0
CHURN_EPOCH = 1_735_689_600
"""Epoch seconds of the first churned pod's lastProbeTime (2025-01-01, the seeded objects' times)."""


# --- the server child ------------------------------------------------------------------------------------------


def serve(pods: int, nodes: int, churn: int) -> int:
    """Seed, announce `{"url": ...}` on stdout, then answer `churn N` / `requests` lines until stdin ends."""
    import kmock

    from karpy_emulator.apiserver import objects, runner, server

    api = server.FakeKubeAPI(watch_history=max(10_000, 2 * churn), object_history=1, request_history=1000)
    db = api._db  # the store, written directly: tens of thousands of POSTs would take minutes
    keys: dict[str, list[Any]] = collections.defaultdict(list)

    async def seed() -> float:
        start = time.perf_counter()
        now = time.time()
        for plural, obj in kube_objects.cluster_objects(pods, nodes):
            meta = obj["metadata"]
            namespace = meta.get("namespace")
            key = (kmock.resource("", "v1", plural), namespace, meta["name"])
            meta.update(uid=objects.new_uid(api._rng), creationTimestamp=objects.timestamp(now), generation=1)
            meta["resourceVersion"] = str(db.resource_version + 1)
            await db.add(key, obj)
            keys[plural].append(key)
        return time.perf_counter() - start

    async def change(count: int) -> float:
        """`count` pod updates, as a kubelet's status update: a label and a condition's time move."""
        start = time.perf_counter()
        async with db.lock:
            for i in range(count):
                key = keys["pods"][i % len(keys["pods"])]
                old = db.live(key)
                assert old is not None
                new = dict(old)
                meta = new["metadata"] = dict(old["metadata"])
                meta["labels"] = {**meta.get("labels", {}), "bench/churn": str(i)}
                meta["resourceVersion"] = str(db.resource_version + 1)
                status = new["status"] = dict(old["status"])
                # A timestamp, as a kubelet writes it (the controller's strict reader refuses a number here).
                probed = {**status["conditions"][-1], "lastProbeTime": objects.timestamp(CHURN_EPOCH + i)}
                status["conditions"] = [*status["conditions"][:-1], probed]
                await db.update(key, old, new)
        return time.perf_counter() - start

    async def requests() -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
        for request in api._object_reaction._requests:
            if request.resource is not None and request.resource.plural:
                action = request.action.value if request.action is not None else request.method
                counts[request.resource.plural][action.lower()] += 1
        api._object_reaction._requests.clear()
        return {plural: dict(by_action) for plural, by_action in counts.items()}

    with runner.KubeAPIRunner(api) as kube:
        seeded = kube.call(seed, timeout=SYNC_TIMEOUT)
        print(json.dumps({"url": kube.url, "seed_s": round(seeded, 2)}), flush=True)
        for line in sys.stdin:
            command, *args = line.split()
            if command == "churn":
                took = kube.call(functools.partial(change, int(args[0])), timeout=CHURN_TIMEOUT)
                print(json.dumps({"churn_s": round(took, 3)}), flush=True)
            elif command == "requests":
                print(json.dumps(kube.call(requests)), flush=True)
    return 0


# --- the consumer child ----------------------------------------------------------------------------------------


def _rss_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Meter:
    """A cache listener: `synced` once `expected` objects are in the cache, then `churned` after `churn` events."""

    def __init__(self, *, expected: int, churn: int) -> None:
        self.expected = expected
        self.churn = churn
        self.objects = 0
        self.synced = asyncio.Event()
        self.churned = asyncio.Event()
        self.first_change: tuple[float, float] | None = None
        self.last_change: tuple[float, float] = (0.0, 0.0)
        self.changes = 0
        self.released: float | None = None

    def observe(self, res: Any, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> None:
        if not self.synced.is_set():
            self.objects += (after is not None) - (before is not None)
            if self.objects >= self.expected:
                self.synced.set()
            return
        now = (time.perf_counter(), time.process_time())
        if self.first_change is None:
            self.first_change = now
        self.changes += 1
        self.last_change = now
        if self.changes >= self.churn:
            self.churned.set()


def _kopf_registry(url: str, cluster: Any, meter: Meter, *, indexed: bool) -> Any:
    import kopf

    from karpy.kube import client, resources

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=url)

    def on_event(res: resources.Resource) -> Callable[..., Any]:
        async def feed(event: Mapping[str, Any], **_: Any) -> None:
            if meter.released is None:
                meter.released = time.perf_counter()
            kind = event["type"] or client.ADDED
            if indexed and kind != client.DELETED:
                return  # the index handler applied it, before this handler was let run
            cluster.apply(res, client.WatchEvent(kind, event["object"]))

        return feed

    def on_index(res: resources.Resource) -> Callable[..., Any]:
        async def index(body: Mapping[str, Any], **_: Any) -> None:
            cluster.apply(res, client.WatchEvent(client.ADDED, dict(body)))

        return index

    for res in (resources.PODS, resources.NODES):
        kopf.on.event(res.group, res.version, res.plural, registry=registry, id=f"feed-{res.plural}")(on_event(res))
        if indexed:
            kopf.index(res.group, res.version, res.plural, registry=registry, id=f"index_{res.plural}")(on_index(res))
    return registry


async def consume(variant: str, url: str, *, expected: int, churn: int) -> dict[str, Any]:
    import kopf

    from karpy import clock as karpy_clock
    from karpy.kube import credentials, resources, rest
    from karpy.state import cluster as state_cluster
    from karpy.state import informer

    clock = karpy_clock.SystemClock()
    cluster = state_cluster.Cluster(clock=clock)
    meter = Meter(expected=expected, churn=churn)
    cluster.add_listener(meter.observe)
    result: dict[str, Any] = {"variant": variant, "baseline_rss_mb": _rss_mb("VmRSS")}
    stop = asyncio.Event()
    wall, cpu = time.perf_counter(), time.process_time()
    if variant == "informer":
        kube = rest.RestClient(credentials.Credentials(url), clock=clock, qps=1000.0, burst=2000, page_size=PAGE)
        running = asyncio.create_task(informer.run_informers(kube, cluster, (resources.PODS, resources.NODES)))
    else:
        settings = kopf.OperatorSettings()
        settings.posting.enabled = False
        settings.watching.chunk_size = PAGE
        settings.watching.server_timeout = informer.WATCH_TIMEOUT
        running = asyncio.create_task(
            kopf.operator(
                registry=_kopf_registry(url, cluster, meter, indexed=variant == "kopf-index"),
                settings=settings,
                clusterwide=True,
                standalone=True,
                stop_flag=stop,
            )
        )
    try:
        await asyncio.wait_for(meter.synced.wait(), SYNC_TIMEOUT)
        result.update(
            sync_s=round(time.perf_counter() - wall, 2),
            sync_cpu_s=round(time.process_time() - cpu, 2),
            rss_synced_mb=_rss_mb("VmRSS"),
        )
        if meter.released is not None:
            result["handlers_released_s"] = round(meter.released - wall, 2)
        print(json.dumps({"synced": True}), flush=True)  # the parent stops us, churns, and resumes us
        if churn:
            await asyncio.wait_for(meter.churned.wait(), CHURN_TIMEOUT)
            assert meter.first_change is not None
            elapsed = meter.last_change[0] - meter.first_change[0]
            spent = meter.last_change[1] - meter.first_change[1]
            result.update(
                events=meter.changes,
                events_per_s=round(meter.changes / elapsed) if elapsed > 0 else None,
                events_per_cpu_s=round(meter.changes / spent) if spent > 0 else None,
                rss_after_churn_mb=_rss_mb("VmRSS"),
            )
        result["rss_peak_mb"] = _rss_mb("VmHWM")
    finally:
        stop.set()
        if variant == "informer":
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await kube.close()
        else:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(running, 60)
    return result


# --- the parent ------------------------------------------------------------------------------------------------


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )


def _line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"child {process.args!r} exited with {process.wait()}")
    result: dict[str, Any] = json.loads(line)
    return result


def _send(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def measure(variant: str, server: subprocess.Popen[str], url: str, *, expected: int, churn: int) -> dict[str, Any]:
    consumer = _child("--consume", variant, "--url", url, "--expected", str(expected), "--churn", str(churn))
    try:
        _line(consumer)  # synced
        os.kill(consumer.pid, signal.SIGSTOP)
        try:
            _send(server, f"churn {churn}")
            churned = _line(server)
        finally:
            os.kill(consumer.pid, signal.SIGCONT)
        result = _line(consumer)
        result["server_churn_s"] = churned["churn_s"]
        consumer.wait(120)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    _send(server, "requests")
    requests = _line(server)
    result["watch_requests"] = {plural: n.get("watch", 0) for plural, n in requests.items()}
    result["list_requests"] = {plural: n.get("list", 0) for plural, n in requests.items()}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--churn", type=int, default=20_000, help="pod updates for the throughput phase")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--consume", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.pods, args.nodes, args.churn)
    if args.consume:
        result = asyncio.run(consume(args.consume, args.url, expected=args.expected, churn=args.churn))
        print(json.dumps(result), flush=True)
        return 0
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)} (known: {', '.join(VARIANTS)})")
    load_before = os.getloadavg()
    server = _child("--serve", "--pods", str(args.pods), "--nodes", str(args.nodes), "--churn", str(args.churn))
    try:
        announced = _line(server)
        results = [
            measure(v, server, announced["url"], expected=args.pods + args.nodes, churn=args.churn) for v in variants
        ]
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    report = {
        "pods": args.pods,
        "nodes": args.nodes,
        "churn": args.churn,
        "seed_s": announced["seed_s"],
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    print(json.dumps(report, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
