"""End-to-end benchmark of the controller on the emulated cluster (not a test).

The emulation (moto, the API server, kubelet / kube-scheduler / workload stand-ins) runs in a child process
(`karpy_emulator.remote.RemoteCluster`); this process runs only the controller
(`karpy_emulator.controlplane.ControlPlane`, upstream's timings: 1 s / 10 s batches, 10 s disruption poll, 15 s
validation) and the measuring loop, as in a real cluster where the controller is a pod of its own. The controller
fetches its catalog from moto over HTTP, as in production, and is given time to cache it before the pods come
(`catalog_warmup_s`, not counted).

NodePool: on-demand r5.8xlarge only (one type, so that a node-count lower bound is well defined), otherwise the
NodePool of upstream's performance suite (core:test/suites/performance/suite_test.go): WhenEmptyOrUnderutilized
after 30 s, a budget of 100% of nodes.

Provisioning (boot delay 0): 1000 pending pods in upstream's perf-suite mix (500 × 0.9 CPU / 3.1 Gi and 500 × 3.5 CPU
/ 28 Gi, two Deployments). `nodeclaims_created_s` is, over every provisioning pass that created NodeClaims, the
longest time from the pass's start (its batch window just closed) until it had created them all
(`nodeclaims_created_first_pass_s`: the first such pass alone). The first pass places every pod; a later pass can
buy a few more: by then the kube-scheduler stand-in has bound pods where it chose (kube-scheduler does not follow
karpy's plan), and the pods still pending are simulated afresh against the room that is left.
`last_nodeclaim_created_s` runs from the start of the first pass until the last NodeClaim of any pass was created;
`pods_bound_s` from the same moment until all pods are bound; `all_launched_s` / `all_registered_s` /
`all_initialized_s` until every NodeClaim had that condition.

What paces the pods, on the same zero (`first_pass_after_deployments_s`: from the Deployments' creation until that
first pass started): `pods_created_s` until the ReplicaSets' `status.replicas` (written by the ReplicaSet stand-in
right after its creates) counted every pod, `pods_seen_s` until the controller's cache held every pod (its informer),
`pods_marked_s` until every pod was, in that cache, bound or marked Unschedulable by the kube-scheduler stand-in
(what makes a pod provisionable), and `pods_bound_tenths_s` until each tenth of the pods was bound (the last is
`pods_bound_s` to the sampling's 0.5 s). A figure is negative when the stage came before the first window closed.
`pods_bound_s` is asked of the API server only once the controller's cache has every pod bound (see
`_settled_in_cache`). `controller_rss_mb` is the peak RSS (VmHWM) of this process (unlike `bench/performance.py`,
which runs `karpy run` in a process of its own, this benchmark times the provisioner's passes and counts the AWS
calls from inside the controller, so its RSS also holds the measuring loop and the emulator's client modules);
`emulation_cpu_s` the CPU seconds the emulation's child process used from the pods' creation until all were bound;
`requests` what the emulated API server answered meanwhile, but watches (its `apiserver_request_total` at
`/metrics`, as "VERB resource[/subresource] code", largest first: the stand-ins' writes, such as the kube-scheduler
stand-in's `PATCH pods/status`, beside the controller's requests and the benchmark's own);
`KARPY_EMULATOR_PROFILE` profiles it (`karpy_emulator.profiling`).
`loadavg_before` / `loadavg_after` are the machine's load averages around the whole run.

Consolidation runs on virtual time, in this process: a fresh emulation and controller share an
`autojump.AutojumpClock` (time jumps to the next timer whenever no request or worker-thread call is in flight, so
every wait of upstream's timings counts in full and the work itself counts as instantaneous). The same 1000 pods
are provisioned (2 s boot delay), then both Deployments are scaled to 70% (1000 → 700) and the clock runs until the
node count is within 5% of the lower bound with every pod bound and nothing disrupting. The lower bound is the
node count of the pattern-LP cost bound of `karpy.scheduling` (`lower_bound_per_hour` of an offline solve of the
remaining pods on the same pool, divided by the type's price, rounded up). `consolidation_virtual_s` is the virtual
time from the scale-down to that moment; `consolidation_node_ratio` is nodes ÷ lower bound then (or at the
deadline); `consolidation_wall_s` is what the phase took on the wall clock.

AWS calls: `aws_calls` is every call the controller's clients made from the end of the catalog warm-up until all
pods were bound, per `service:Operation` (`aws_calls_total` their sum), counted by the same hooks as the
`karpy_cloudprovider_api_calls_total` metric; `create_fleet_batches` is how many merged CreateFleet calls launched
how many instances, and `create_fleet_target` the most merged calls batching should need: distinct launch
configurations × ceil(nodes / 1,000) per provisioning pass that created NodeClaims; `create_fleet_per_pass` gives
the same per pass (its batch window): NodeClaims created, merged CreateFleet calls and instances until the next such
pass, its own target, and when each call went out. The consolidation phase reports
the calls of its provisioning and of its scale-down apart.

    .venv/bin/python bench/e2e.py --json
    .venv/bin/python bench/e2e.py --json --pods 10000 --scale-to 3000
    .venv/bin/python bench/e2e.py --json --pods 50000 --skip-consolidation --steady-minutes 5

`--steady-minutes M`: once every pod is bound, the cluster is left alone for M wall-clock minutes and
`steady_state` gives, per minute, the controller's CPU (its process time over the minute, in cores) and the
emulation's (`emulation_cpu_cores`), both processes' RSS at the minute's end, and the live nodes and pods;
`steady_requests` what the API server answered over those minutes, as `requests`.
`provisioning_minutes` gives the same per wall-clock minute from the Deployments' creation until every pod was bound
(or the run gave up), with the pods the controller's cache then had and had bound and the NodeClaims it knew: how far
a run that does not finish got, and which process was busy meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from prometheus_client import parser as prometheus_client_parser

from karpy import clock as karpy_clock
from karpy.api import labels, parse
from karpy.cloudprovider import catalog
from karpy.cloudprovider.aws import accounting, ec2batch
from karpy.kube import client, resources, rest
from karpy.scheduling import workloads as scheduling_workloads
from karpy.simulate import manifests, plan
from karpy_emulator import autojump, cluster, controlplane, demo, remote, remote_controller, workloads

INSTANCE_TYPE = "r5.8xlarge"
VIRTUAL_BOOT_DELAY = 2.0
"""Registration to Ready in the consolidation phase (seconds of virtual time)."""
CONSOLIDATE_AFTER = "30s"
BUDGET = "100%"
KEPT = 0.7
"""Share of the pods left after the scale-down (1000 → 700) unless `--scale-to` says how many."""
WITHIN_BOUND = 1.05

SMALL = ("small", "900m", "3174Mi")  # 0.9 CPU / 3.1 Gi
LARGE = ("large", "3500m", "28Gi")


def _rss_mb(field: str = "VmRSS") -> float:
    """This process's RSS (VmRSS) or its peak (VmHWM), in MB."""
    return remote_controller.rss_mb("self", field)


def _deployment(name: str, cpu: str, memory: str, replicas: int) -> dict[str, Any]:
    return demo.inflate_manifest(replicas, name=name, requests={"cpu": cpu, "memory": memory})


def _pool() -> dict[str, Any]:
    body = demo.nodepool_manifest(consolidate_after=CONSOLIDATE_AFTER)
    body["spec"]["limits"] = {"cpu": "100000"}
    body["spec"]["disruption"]["budgets"] = [{"nodes": BUDGET}]
    body["spec"]["template"]["spec"]["requirements"].append(
        {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]}
    )
    return body


def node_lower_bound(pool: Mapping[str, Any], nodeclass: Mapping[str, Any], deployments: list[dict[str, Any]]) -> int:
    """Nodes of `INSTANCE_TYPE` that the pods of `deployments` need at least (see the module docstring)."""
    offline = manifests.Cluster(
        nodepools=[parse.nodepool(pool)],
        nodeclasses={str(nodeclass["metadata"]["name"]): parse.ec2nodeclass(nodeclass)},
        pending=[pod for body in deployments for pod in scheduling_workloads.expand(body)],
    )
    results = plan.run(offline, plan.Options())
    price = catalog.on_demand_price(INSTANCE_TYPE)
    if price is None or results.lower_bound_per_hour <= 0:
        raise RuntimeError(f"no lower bound for {INSTANCE_TYPE}: price {price}, bound {results.lower_bound_per_hour}")
    return math.ceil(round(results.lower_bound_per_hour / price, 6))


async def _until(
    check: Callable[[], Awaitable[bool]],
    *,
    within: float,
    what: str,
    step: float = 0.2,
    clock: karpy_clock.Clock | None = None,
) -> float:
    clock = clock or karpy_clock.SystemClock()
    start = clock.now()
    while not await _answered(check):
        if clock.now() - start > within:
            raise TimeoutError(f"{what}: not done after {within:.0f}s")
        await clock.sleep(step)
    return clock.now() - start


async def _answered(check: Callable[[], Awaitable[bool]]) -> bool:
    """The check's answer; no when the emulated API server, busy with 10,000 pods, did not answer in time (the
    measuring loop asks again rather than end the run on the emulation's account)."""
    try:
        return await check()
    except (TimeoutError, OSError, client.KubeError):
        return False


async def _patiently(read: Callable[[], Awaitable[tuple[list[dict[str, Any]], str]]]) -> list[dict[str, Any]]:
    """The items of a LIST that the emulated API server, busy with 10,000 pods, may time out: asked again (up to
    five times) rather than end the run without its figures."""
    for _ in range(4):
        try:
            return (await read())[0]
        except (TimeoutError, OSError, client.KubeError):
            continue
    return (await read())[0]


UNBOUND_PODS = "spec.nodeName="
"""Field selector of the pods not bound to a node."""
MILESTONES = ("Launched", "Registered", "Initialized")


async def _milestones(plane: controlplane.ControlPlane, reached: dict[str, float]) -> None:
    """Note (monotonic) when every NodeClaim the controller knows first has each condition; runs until cancelled."""
    while len(reached) < len(MILESTONES):
        claims = plane.cluster.objects(resources.NODECLAIMS)
        for name in MILESTONES:
            if name not in reached and claims and all(_condition(c, name) for c in claims):
                reached[name] = time.monotonic()
        await asyncio.sleep(0.1)


def _condition(claim: Mapping[str, Any], name: str) -> bool:
    conditions = (claim.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == name and c.get("status") == "True" for c in conditions)


TENTHS = 10
"""`pods_bound_tenths_s` has one figure per tenth of the pods."""
PROGRESS_STEP = 0.5
"""Seconds between the pod progress samples (the figures' resolution; the sample reads the controller's cache)."""


async def _pod_progress(api: Any, plane: controlplane.ControlPlane, replicas: int, reached: dict[str, float]) -> None:
    """Note (monotonic) when the pods reached each stage that separates creating them from binding them (see the
    module docstring); runs until every stage is reached or it is cancelled."""
    stages = 3 + TENTHS
    while len(reached) < stages:
        with contextlib.suppress(TimeoutError, OSError, client.KubeError):  # busy API server: next sample
            sets, _ = await api.list(workloads.REPLICASETS, namespace="default")
            if sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in sets) >= replicas:
                reached.setdefault("created", time.monotonic())
        now = time.monotonic()
        pods = [p for p in plane.cluster.pods() if p.namespace == "default"]
        bound = sum(1 for p in pods if p.node_name)
        if len(pods) >= replicas:
            reached.setdefault("seen", now)
        if bound + len(plane.cluster.pending_pods()) >= replicas:
            reached.setdefault("marked", now)
        for tenth in range(1, TENTHS + 1):
            if bound * TENTHS >= tenth * replicas:
                reached.setdefault(f"bound_{tenth}", now)
        await asyncio.sleep(PROGRESS_STEP)


def _progress_figures(reached: Mapping[str, float], *, zero: float | None, deployments_at: float) -> dict[str, Any]:
    """The pod progress stages as seconds since the first provisioning pass started (None: not reached)."""

    def since(key: str) -> float | None:
        return round(reached[key] - zero, 2) if zero is not None and key in reached else None

    return {
        "first_pass_after_deployments_s": round(zero - deployments_at, 2) if zero is not None else None,
        "pods_created_s": since("created"),
        "pods_seen_s": since("seen"),
        "pods_marked_s": since("marked"),
        "pods_bound_tenths_s": [since(f"bound_{tenth}") for tenth in range(1, TENTHS + 1)],
    }


async def _warm_up(plane: controlplane.ControlPlane, *, within: float) -> float:
    """Wait until the controller has its catalog, as a running controller has (upstream's instance-type controller
    fetches types and offerings at start): seconds it took. Without the in-process shortcut the first listing is
    moto serialising ~1,400 shapes over HTTP, which is the emulator's cost, not the controller's."""

    async def catalog_cached() -> bool:
        provider = plane.provider
        pools = plane.cluster.nodepools()
        return provider is not None and bool(pools) and bool(await provider.instance_types(pools[0]))

    return await _until(catalog_cached, within=within, what="controller catalog", step=0.5)


async def benchmark(
    replicas: int,
    *,
    within: float,
    consolidation_within: float,
    skip_consolidation: bool = False,
    skip_provisioning: bool = False,
    memory_report: bool = False,
    scale_to: int | None = None,
    steady_minutes: int = 0,
    scheduler_qps: float = cluster.ClusterOptions().scheduler_qps,
) -> dict[str, Any]:
    kept = scale_to if scale_to is not None else round(replicas * KEPT)
    if skip_provisioning:
        return {
            "pods": replicas,
            **await consolidation(replicas, kept, within=within, consolidation_within=consolidation_within),
        }
    options = cluster.ClusterOptions(
        cluster_name="karpy-bench", boot_delay=0.0, interval=0.5, scheduler_qps=scheduler_qps
    )
    async with remote.RemoteCluster(options) as emulated:
        api = emulated.client
        nodeclass = demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name)
        await api.create(resources.EC2NODECLASSES, nodeclass)
        await api.create(resources.NODEPOOLS, _pool())
        plane = controlplane.ControlPlane(emulated, controlplane.Options(interruption=False, fast_catalog=False))
        passes: list[tuple[float, float, int]] = []
        original = plane.ctrl.provisioner.provision

        async def timed_provision() -> Any:
            start = time.monotonic()
            outcome = await original()
            passes.append((start, time.monotonic(), len(outcome.created)))
            return outcome

        plane.ctrl.provisioner.provision = timed_provision  # type: ignore[method-assign]
        fleets: list[tuple[float, int]] = []  # (monotonic, instances asked) of each merged CreateFleet call
        record_batch = plane.aws_calls.record_batch

        def recorded_batch(name: str, *, size: int, window_seconds: float) -> None:
            if name == "create_fleet":
                fleets.append((time.monotonic(), size))
            record_batch(name, size=size, window_seconds=window_seconds)

        plane.aws_calls.record_batch = recorded_batch  # type: ignore[method-assign]
        async with plane:
            warmup = await _warm_up(plane, within=within)
            calls_before = plane.aws_calls.calls()
            reached: dict[str, float] = {}
            sampler = asyncio.create_task(_milestones(plane, reached))
            progress: dict[str, float] = {}
            progress_sampler = asyncio.create_task(_pod_progress(api, plane, replicas, progress))
            minutes: list[dict[str, float]] = []
            minute_sampler = asyncio.create_task(_per_minute(plane, emulated.endpoints.pid, minutes))
            emulation_cpu = remote_controller.cpu_s(emulated.endpoints.pid)
            counted = await request_counts(emulated.api_url)
            deployments_at = time.monotonic()
            for name, cpu, memory in (SMALL, LARGE):
                await api.create(workloads.DEPLOYMENTS, _deployment(name, cpu, memory, replicas // 2))
            error = None
            try:
                await _until(lambda: _settled_in_cache(api, plane, replicas), within=within, what="all pods bound")
            except TimeoutError as exc:
                error = str(exc)
            bound_at = time.monotonic()
            emulation_cpu = remote_controller.cpu_s(emulated.endpoints.pid) - emulation_cpu
            requests = counted_since(counted, await request_counts(emulated.api_url))
            for task in (sampler, progress_sampler, minute_sampler):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            rss_peak = _rss_mb("VmHWM")
            held = _largest_types() if memory_report else None
            steady = None
            steady_requests = None
            if error is None and steady_minutes:
                counted = await request_counts(emulated.api_url)
                steady = await steady_state(api, emulated.endpoints.pid, minutes=steady_minutes)
                steady_requests = counted_since(counted, await request_counts(emulated.api_url))
            first = next((p for p in passes if p[2] > 0), None)
            last = next((p for p in reversed(passes) if p[2] > 0), None)
            claims = await _patiently(lambda: api.list(resources.NODECLAIMS))
            calls = _since(plane.aws_calls.calls(), calls_before)
            out: dict[str, Any] = {
                "pods": replicas,
                "scheduler_qps": scheduler_qps,
                "catalog_warmup_s": round(warmup, 1),
                "nodeclaims": len(claims),
                "provisioning_passes": len(passes),
                "nodeclaims_created_s": max((round(p[1] - p[0], 2) for p in passes if p[2] > 0), default=None),
                "nodeclaims_created_first_pass_s": round(first[1] - first[0], 2) if first else None,
                "nodeclaims_in_first_pass": first[2] if first else 0,
                "passes_creating_nodeclaims": sum(1 for p in passes if p[2] > 0),
                "last_nodeclaim_created_s": round(last[1] - first[0], 2) if first and last else None,
                "pods_bound_s": round(bound_at - first[0], 2) if first and error is None else None,
                **{
                    f"all_{name.lower()}_s": round(reached[name] - first[0], 2) if first and name in reached else None
                    for name in MILESTONES
                },
                **_progress_figures(progress, zero=first[0] if first else None, deployments_at=deployments_at),
                "controller_rss_mb": round(rss_peak, 1),
                "emulation_cpu_s": round(emulation_cpu, 1),
                "requests": requests,
                "provisioning_minutes": minutes,
                "aws_calls_total": sum(calls.values()),
                "aws_calls": accounting.by_operation(calls),
                "create_fleet_batches": _fleet_batches(plane.aws_calls),
                "create_fleet_target": create_fleet_target(claims, [p[2] for p in passes]),
                "create_fleet_per_pass": create_fleet_per_pass(claims, passes, fleets),
                **({} if skip_consolidation else {"consolidation_virtual_s": None, "consolidation_node_ratio": None}),
                "error": error,
                **({"controller_memory_by_type": held} if held is not None else {}),
                **({"steady_state": steady, "steady_requests": steady_requests} if steady is not None else {}),
            }
    if out["error"] is None and not skip_consolidation:
        out.update(await consolidation(replicas, kept, within=within, consolidation_within=consolidation_within))
    return out


async def request_counts(api_url: str) -> dict[str, int]:
    """The emulated API server's `apiserver_request_total`, but watches, as "VERB resource[/subresource] code"."""
    async with aiohttp.ClientSession() as session, session.get(f"{api_url}/metrics") as response:
        response.raise_for_status()
        text = await response.text()
    counts: dict[str, int] = {}
    for family in prometheus_client_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            got = sample.labels
            if sample.name != "apiserver_request_total" or got["verb"] == "WATCH":
                continue
            resource = got["resource"] + (f"/{got['subresource']}" if got["subresource"] else "")
            key = f"{got['verb']} {resource} {got['code']}"
            counts[key] = counts.get(key, 0) + int(sample.value)
    return counts


def counted_since(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The requests of one phase, by key, largest first."""
    moved = {key: count - before.get(key, 0) for key, count in after.items() if count > before.get(key, 0)}
    return dict(sorted(moved.items(), key=lambda item: (-item[1], item[0])))


async def _one_minute(emulation: int, minute: int) -> dict[str, float]:
    """Wait a wall-clock minute; the CPU the controller (this process) and the emulation used over it, in cores,
    and both processes' RSS at its end."""
    cpu, emulated, wall = time.process_time(), remote_controller.cpu_s(emulation), time.monotonic()
    await asyncio.sleep(60.0)
    elapsed = time.monotonic() - wall
    return {
        "minute": minute,
        "cpu_cores": round((time.process_time() - cpu) / elapsed, 3),
        "emulation_cpu_cores": round((remote_controller.cpu_s(emulation) - emulated) / elapsed, 3),
        "rss_mb": round(_rss_mb(), 1),
        "emulation_rss_mb": round(remote_controller.rss_mb(emulation), 1),
    }


async def _per_minute(plane: controlplane.ControlPlane, emulation: int, samples: list[dict[str, float]]) -> None:
    """`provisioning_minutes` (see the module docstring): one sample a minute until cancelled, read from the
    controller's cache (no request to the busy API server)."""
    for minute in itertools.count(1):
        sample = await _one_minute(emulation, minute)
        pods = [p for p in plane.cluster.pods() if p.namespace == "default"]
        sample.update(
            pods=len(pods),
            pods_bound=sum(1 for p in pods if p.node_name),
            nodeclaims=len(plane.cluster.objects(resources.NODECLAIMS)),
        )
        samples.append(sample)


async def steady_state(api: Any, emulation: int, *, minutes: int) -> list[dict[str, float]]:
    """The controller idling over a settled cluster: per wall-clock minute, the CPU it used (cores: its process
    time over the minute) and its RSS at the minute's end, with the live nodes and pods then. Nothing changes in
    the cluster meanwhile, so what the controller spends is its own steady cost (informers, resyncs, the
    disruption poll), and what the emulation spends is idle (its stand-ins wake on changes only)."""
    samples = []
    for minute in range(1, minutes + 1):
        sample = await _one_minute(emulation, minute)
        sample["nodes"] = len(await _live_nodes(api))
        sample["pods"] = len(await _patiently(lambda: api.list(resources.PODS, namespace="default")))
        samples.append(sample)
    return samples


async def consolidation(replicas: int, kept: int, *, within: float, consolidation_within: float) -> dict[str, Any]:
    """Provision `replicas` pods, scale to `kept` and time the way down to the lower bound, all on one autojump
    clock (see the module docstring). `within` and `consolidation_within` are virtual seconds."""
    wall = time.monotonic()
    options = cluster.ClusterOptions(
        cluster_name="karpy-bench", boot_delay=VIRTUAL_BOOT_DELAY, autojump=True, start_time=time.time()
    )
    async with cluster.EmulatedCluster(options) as emulated:
        clock = emulated.clock
        if not isinstance(clock, autojump.AutojumpClock):
            raise TypeError("the consolidation phase needs the autojump clock")
        api = emulated.client
        nodeclass = demo.nodeclass_manifest(role=emulated.node_role, discovery=emulated.cluster_name)
        await api.create(resources.EC2NODECLASSES, nodeclass)
        await api.create(resources.NODEPOOLS, _pool())
        plane = controlplane.ControlPlane(emulated, controlplane.Options(interruption=False))
        async with plane:
            calls_before = plane.aws_calls.calls()
            for name, cpu, memory in (SMALL, LARGE):
                await api.create(workloads.DEPLOYMENTS, _deployment(name, cpu, memory, replicas // 2))
            provisioned = await _until(
                lambda: _settled(api, replicas), within=within, what="all pods bound", step=1.0, clock=clock
            )
            nodes_before = len(await _live_nodes(api))
            calls_provisioned = plane.aws_calls.calls()
            kept = kept // 2  # per Deployment
            scaled = [_deployment(name, cpu, memory, kept) for name, cpu, memory in (SMALL, LARGE)]
            bound = node_lower_bound(_pool(), nodeclass, scaled)
            start = clock.now()
            for body in scaled:
                await api.patch(
                    workloads.DEPLOYMENTS, body["metadata"]["name"], {"spec": {"replicas": kept}}, namespace="default"
                )
            nodes = nodes_before
            timeline: list[tuple[float, int]] = []  # (virtual seconds since the scale-down, live nodes) at changes
            reached_at = None
            while clock.now() - start < consolidation_within:
                await clock.sleep(1.0)
                nodes = len(await _live_nodes(api))
                if not timeline or timeline[-1][1] != nodes:
                    timeline.append((round(clock.now() - start, 1), nodes))
                if nodes <= WITHIN_BOUND * bound and await _settled(api, 2 * kept):
                    reached_at = clock.now()
                    break
            consolidation_calls = _since(plane.aws_calls.calls(), calls_provisioned)
            provisioning_calls = _since(calls_provisioned, calls_before)
    return {
        "consolidation_provisioning_virtual_s": round(provisioned, 1),
        "consolidation_pods": 2 * kept,
        "nodes_before_consolidation": nodes_before,
        "nodes_after_consolidation": nodes,
        "node_lower_bound": bound,
        "consolidation_virtual_s": round(reached_at - start, 1) if reached_at is not None else None,
        "consolidation_node_ratio": round(nodes / bound, 3),
        "consolidation_wall_s": round(time.monotonic() - wall, 1),
        "clock_jumps": clock.jumps,
        "consolidation_timeline": timeline,
        "consolidation_provisioning_aws_calls_total": sum(provisioning_calls.values()),
        "consolidation_provisioning_aws_calls": accounting.by_operation(provisioning_calls),
        "consolidation_aws_calls_total": sum(consolidation_calls.values()),
        "consolidation_aws_calls": accounting.by_operation(consolidation_calls),
    }


def _largest_types(top: int = 15) -> dict[str, list[float]]:
    """What the controller process holds once provisioning is over: [MB, objects] of the `top` types by the summed
    shallow size of their live objects that the garbage collector tracks (dicts, lists, dataclasses; str and int
    are untracked and not counted), largest first."""
    sizes: dict[str, list[float]] = {}
    for obj in gc.get_objects():
        entry = sizes.setdefault(type(obj).__qualname__, [0.0, 0])
        entry[0] += sys.getsizeof(obj)
        entry[1] += 1
    largest = sorted(sizes.items(), key=lambda item: -item[1][0])[:top]
    return {name: [round(size / 2**20, 1), count] for name, (size, count) in largest}


def create_fleet_target(claims: list[dict[str, Any]], created_per_pass: list[int]) -> int:
    """The most CreateFleet calls batching should need: distinct launch configurations × ceil(nodes / 1,000) per
    window, a provisioning pass counting as one window. NodeClaims of one NodePool, node class and requirements send
    CreateFleet requests identical but for their count (`ec2batch` merges those, up to 1,000 a call)."""
    configurations = {
        json.dumps(
            [
                (c["metadata"].get("labels") or {}).get(labels.LABEL_NODEPOOL),
                c["spec"].get("nodeClassRef"),
                sorted(json.dumps(r, sort_keys=True) for r in c["spec"].get("requirements") or ()),
            ],
            sort_keys=True,
        )
        for c in claims
    }
    per_call = ec2batch.CREATE_FLEET_WINDOW.max_items
    return len(configurations) * sum(math.ceil(n / per_call) for n in created_per_pass if n > 0)


def create_fleet_per_pass(
    claims: list[dict[str, Any]], passes: list[tuple[float, float, int]], fleets: list[tuple[float, int]]
) -> list[dict[str, Any]]:
    """Per provisioning pass that created NodeClaims (its batch window): the NodeClaims it created, the merged
    CreateFleet calls from its start until the next such pass started (its launches) with the instances they asked
    for, the target for the pass alone (`create_fleet_target`), and when its calls went out (seconds after the
    pass started)."""
    creating = [p for p in passes if p[2] > 0]
    out = []
    for index, (start, _, created) in enumerate(creating):
        end = creating[index + 1][0] if index + 1 < len(creating) else math.inf
        calls = [(at, size) for at, size in fleets if start <= at < end]
        out.append(
            {
                "nodeclaims": created,
                "create_fleet_calls": len(calls),
                "instances": sum(size for _, size in calls),
                "target": create_fleet_target(claims, [created]),
                "calls_at_s": [round(at - start, 2) for at, _ in calls],
            }
        )
    return out


def _fleet_batches(calls: accounting.ApiCalls) -> dict[str, int]:
    """Merged CreateFleet calls and the instances they asked for, since the controller started."""
    stats = calls.batches().get("create_fleet")
    return {"calls": stats.sizes.count, "instances": int(stats.sizes.total)} if stats else {"calls": 0, "instances": 0}


def _since(now: Mapping[tuple[str, str], int], before: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """Calls per (service, operation) made between two snapshots of the controller's count."""
    return {key: n - before.get(key, 0) for key, n in now.items() if n > before.get(key, 0)}


async def _live_nodes(api: Any) -> list[dict[str, Any]]:
    items, _ = await api.list(resources.NODES)
    return [n for n in items if not n["metadata"].get("deletionTimestamp")]


async def _settled_in_cache(api: Any, plane: controlplane.ControlPlane, replicas: int) -> bool:
    """`_settled`, asked of the API server only once the controller's cache has every pod bound: each ask is a
    filtered LIST that the emulated API server answers by walking every pod, once a second for the whole run (a
    tenth of its thread's time in a 3,000-pod profile), a load no real cluster's API server carries for karpy."""
    pods = [p for p in plane.cluster.pods() if p.namespace == "default"]
    if len(pods) != replicas or not all(p.node_name for p in pods):
        return False
    return await _settled(api, replicas)


async def _settled(api: Any, replicas: int) -> bool:
    """Exactly `replicas` live pods, all bound, and no NodeClaim being deleted. Asks first whether one pod is still
    unbound (a page of one): this loop runs in the controller's process, and a LIST of the 10,000 pending pods every
    second would count in its RSS."""
    if isinstance(api, rest.RestClient):
        params = {"fieldSelector": UNBOUND_PODS, "limit": "1"}
        page = await api._call("GET", resources.PODS.path(namespace="default"), params=params)
        if any(not p["metadata"].get("deletionTimestamp") for p in page.get("items") or ()):
            return False
    unbound, _ = await api.list(resources.PODS, namespace="default", field_selector=UNBOUND_PODS)
    if any(not p["metadata"].get("deletionTimestamp") for p in unbound):
        return False
    # The NodeClaims before every pod: while consolidation deletes some, a scale-out's last seconds would otherwise
    # decode all the pods each second in the controller's process (its CPU counts in the performance suite).
    claims, _ = await api.list(resources.NODECLAIMS)
    if any(c["metadata"].get("deletionTimestamp") for c in claims):
        return False
    pods, _ = await api.list(resources.PODS, namespace="default")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return len(live) == replicas and all(p["spec"].get("nodeName") for p in live)


def add_scheduler_qps(parser: argparse.ArgumentParser) -> None:
    """`--scheduler-qps`: the kube-scheduler rate a benchmark's emulated cluster stands for."""
    parser.add_argument(
        "--scheduler-qps",
        type=float,
        default=cluster.ClusterOptions().scheduler_qps,
        help="requests a second of the kube-scheduler stand-in's client (default: kube-scheduler's 50; EKS's "
        "Provisioned Control Plane: 167 XL, 283 2XL, 400 4XL; 0: no limit)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--within", type=float, default=600.0, help="seconds before giving up on provisioning")
    parser.add_argument(
        "--consolidation-within",
        type=float,
        default=1200.0,
        help="virtual seconds before giving up on consolidation",
    )
    parser.add_argument("--skip-consolidation", action="store_true", help="stop after provisioning")
    parser.add_argument(
        "--memory-report", action="store_true", help="report the controller's largest object types after provisioning"
    )
    parser.add_argument(
        "--skip-provisioning", action="store_true", help="run only the consolidation phase (on virtual time)"
    )
    parser.add_argument(
        "--scale-to", type=int, default=None, help="pods left for the consolidation phase (default: 70%% of --pods)"
    )
    parser.add_argument(
        "--steady-minutes",
        type=int,
        default=0,
        help="once every pod is bound, report the controller's CPU and RSS each minute for this many minutes",
    )
    add_scheduler_qps(parser)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    result = asyncio.run(
        benchmark(
            args.pods,
            within=args.within,
            consolidation_within=args.consolidation_within,
            skip_consolidation=args.skip_consolidation,
            skip_provisioning=args.skip_provisioning,
            memory_report=args.memory_report,
            scale_to=args.scale_to,
            steady_minutes=args.steady_minutes,
            scheduler_qps=args.scheduler_qps,
        )
    )
    # The machine is shared: the load average says how far the wall-clock figures are other processes' turns.
    result["loadavg_before"] = [round(x, 2) for x in load_before]
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
