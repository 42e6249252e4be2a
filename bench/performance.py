"""Upstream's performance suite on the emulated cluster (not a test).

Each scenario of kubernetes-sigs/karpenter `test/suites/performance` (basic_test.go, wide_deployments_test.go,
host_name_spreading_test.go, host_name_spreading_xl_test.go, drift_performance_test.go, do_no_disrupt_test.go,
interference_test.go) is ported here as data: its Deployments, its phases (scale-out, consolidation after a
scale-in, drift after a NodePool template change) and the thresholds of its assertions (thresholds.go's inline
defaults). Its NodePool is the suite's (suite_test.go): WhenEmptyOrUnderutilized after 30 s, a budget of 100 % of
nodes, no limits, and instance types of fewer than 32 vCPUs (the suite's KWOK requirement `instance-size Lt 32`,
here `karpenter.k8s.aws/instance-cpu Lt 32`) from the demo's c, m and r families, on demand.

How it is measured, as upstream's report does it on a real cluster (report.go, common/monitor.go: the karpenter
container's memory and CPU, from Prometheus):
- the emulation (moto, the API server and the kubelet, kube-scheduler and workload stand-ins) runs in a child
  process (`karpy_emulator.remote.RemoteCluster`), the controller in another, as users run it (`karpy run`, through
  `karpy_emulator.remote_controller.KarpyRun`: upstream's batch windows, disruption poll and validation delay, as
  `controlplane.ControlPlane` uses them), and the measuring loop in this one, on the wall clock. Before the first
  phase the controller is given time to list its catalog (`catalog_warmup_s`, not counted);
- `total_time_s`: from the phase's change until its pods are all bound and, for consolidation and drift, until no
  node has been draining (deleted, or tainted karpenter.sh/disrupted) for 3 minutes and, for drift, every old node
  is gone, those 3 minutes included (upstream's `monitorConsolidationRounds`). A phase is given the longer of its
  upstream test's timeout and its total-time threshold (`wait_s`; `--within` overrides it). Upstream's monitor does
  not wait that long: it returns `timeout` after the pods are healthy, done or not, without failing the test, and
  its total time stops there; `upstream_report_time_s` is the time upstream's report would have shown, and
  `draining_at_upstream_timeout` whether nodes were still draining when it returned;
- `cpu_util` / `memory_util`: the mean over the nodes karpy launched of requested / allocatable, at the end of the
  phase (`Monitor.AvgUtilization`);
- `controller_p95_memory_mb`: the 95th percentile of the controller process's RSS (/proc/<pid>/status VmRSS),
  sampled every 0.5 s during the phase (each scenario runs its own controller, so one scenario's memory never counts
  in the next); `controller_avg_cpu_cores`: its CPU seconds (`controller_cpu_s`: /proc/<pid>/stat utime + stime,
  every thread) over the phase's wall seconds. Neither counts the measuring loop or the emulation; the machine's
  load averages are printed beside them, as the wall clock also counts other processes.
- `requests`: what the emulated API server answered during the phase, but watches, as "VERB resource code" (its
  `/metrics`, kube-apiserver's `apiserver_request_total`): the controller's GETs and status writes, beside the
  stand-ins' own requests.
Every figure is printed beside its threshold and the margin (threshold / figure for upper bounds, figure /
threshold for lower bounds).

    .venv/bin/python bench/performance.py --json                       # every scenario (tens of minutes)
    .venv/bin/python bench/performance.py --json --scenarios basic,interference
    .venv/bin/python bench/performance.py --json --scenarios basic --profile /tmp/prof   # + a cProfile of karpy run

`--profile DIR` runs the controller under cProfile (`bench/profiled_run.py`): its main thread (the event loop), each
function's figures in CPU seconds of that thread, not wall seconds (the worker threads, solves and boto3 calls, are
not in it). It writes `DIR/<scenario>.<phase>.prof` (`python -m pstats`) for each phase, from the phase's change to
its end, `DIR/<scenario>.before-<phase>.prof` for what came before it (the first: start and catalog warm-up), and
`DIR/<scenario>.end.prof` for what came after the last. cProfile slows what it profiles, so a profiled run's
figures are not the benchmark's; compare `controller_cpu_s` of unprofiled runs.
`--memory-report DIR` runs it under tracemalloc instead (`bench/traced_run.py`) and writes `DIR/<scenario>.jsonl`,
a row at the end of each phase: RSS, traced bytes and their peak, traced bytes by package (slowed, like a profile).
`--logs DIR` keeps the controller's JSON log as `DIR/<scenario>/karpy.log` (otherwise it goes with a temporary
directory).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import e2e
from karpy.api import labels, quantity
from karpy.kube import resources
from karpy_emulator import cluster, demo, remote, remote_controller, workloads

TRACED_RUN = pathlib.Path(__file__).with_name("traced_run.py")
PROFILED_RUN = pathlib.Path(__file__).with_name("profiled_run.py")
PROFILE_WRITTEN_WITHIN = 30.0
"""Seconds the controller is given to write a profile segment after the signal (a large one takes a while)."""
SAMPLE_EVERY = 0.5
"""Seconds between samples of the controller's RSS."""
WARM_UP = 1800.0
"""Seconds the controller is given to list its catalog before the first phase, unless --within says otherwise."""
STABLE = 180.0
"""Seconds without a draining node after which a consolidation or drift phase is over (upstream's report: 3 minutes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    """One Deployment of a scenario (upstream's `test.CreateDeploymentOptions` and its modifiers)."""

    name: str
    cpu: str
    memory: str
    hostname_spread: bool = False
    zone_spread: bool = False
    anti_affinity: bool = False
    do_not_disrupt: bool = False

    def manifest(self, replicas: int) -> dict[str, Any]:
        body = demo.inflate_manifest(replicas, name=self.name, requests={"cpu": self.cpu, "memory": self.memory})
        template = body["spec"]["template"]
        selector = {"matchLabels": {"app": self.name}}
        spreads = []
        if self.zone_spread:
            spreads.append(_spread(labels.LABEL_ZONE, selector))
        if self.hostname_spread:
            spreads.append(_spread(labels.LABEL_HOSTNAME, selector))
        if spreads:
            template["spec"]["topologySpreadConstraints"] = spreads
        if self.anti_affinity:
            term = {"labelSelector": selector, "topologyKey": labels.LABEL_HOSTNAME}
            template["spec"]["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        if self.do_not_disrupt:
            template["metadata"]["annotations"] = {labels.ANNOTATION_DO_NOT_DISRUPT: "true"}
        return body


def _spread(key: str, selector: Mapping[str, Any]) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": dict(selector)}


@dataclasses.dataclass(frozen=True, slots=True)
class Thresholds:
    """An upstream phase's assertions; None where it asserts nothing."""

    total_time_s: float | None = None
    cpu_util: float | None = None
    memory_util: float | None = None
    memory_mb: float | None = None
    cpu_cores: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Phase:
    name: str
    kind: str
    """scale-out, consolidation or drift."""
    replicas: Mapping[str, int]
    """Deployment -> replicas at the start of the phase (created when new); unnamed ones keep theirs."""
    thresholds: Thresholds
    timeout_s: float
    """The `timeout` upstream's test passes to its Report*WithOutput call for this phase (report.go: how long
    `EventuallyExpectHealthyPodCountWithTimeout` waits for the pods before it fails the test, and how long
    `monitorConsolidationRounds` / ReportDrift's loop watch the nodes before they return, without failing)."""

    @property
    def wait_s(self) -> float:
        """How long the benchmark gives the phase before it reports it not done: the longer of upstream's timeout
        and its total-time threshold, as upstream fails the test only on one of those two (a consolidation phase
        upstream waits for up to 2 × timeout: pods, then rounds; its TotalTime assertion fails past the threshold)."""
        return max(self.timeout_s, self.thresholds.total_time_s or 0.0)


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    source: str
    workloads: Sequence[Workload]
    phases: Sequence[Phase]


SMALL = Workload("small-resource-app", "900m", "3100Mi")
LARGE = Workload("large-resource-app", "3500m", "28Gi")
SMALL_SPREAD = dataclasses.replace(SMALL, hostname_spread=True)
MINUTE = 60.0


def _wide() -> list[Workload]:
    """wide_deployments_test.go getDeterministicDeploymentConfigs: 30 Deployments, every one zone-spread, the first
    three hostname anti-affine, the next three hostname-spread."""
    cpus = [
        "240m",
        "450m",
        "650m",
        "900m",
        "1400m",
        "1900m",
        "2400m",
        "2800m",
        "3300m",
        "3700m",
        "2300m",
        "900m",
        "1300m",
        "2800m",
        "1800m",
        "1850m",
        "3300m",
        "3800m",
        "225m",
        "450m",
        "700m",
        "900m",
        "1300m",
        "1800m",
        "2400m",
        "2800m",
        "3400m",
        "3800m",
        "3300m",
        "2800m",
    ]
    memories = [
        "300Mi",
        "400Mi",
        "700Mi",
        "1Gi",
        "2Gi",
        "4Gi",
        "8Gi",
        "4Gi",
        "16Gi",
        "10Gi",
        "64Gi",
        "30Gi",
        "32Gi",
        "32Gi",
        "30Gi",
        "20Gi",
        "30Gi",
        "300Mi",
        "500Mi",
        "750Mi",
        "1Gi",
        "2Gi",
        "4Gi",
        "8Gi",
        "16Gi",
        "32Gi",
        "28Gi",
        "64Gi",
        "13Gi",
        "24Gi",
    ]
    return [
        Workload(
            f"wide-deployment-{i + 1}",
            cpu,
            memory,
            zone_spread=True,
            anti_affinity=i < 3,
            hostname_spread=3 <= i < 6,
        )
        for i, (cpu, memory) in enumerate(zip(cpus, memories, strict=True))
    ]


WIDE = _wide()


def _wide_replicas(initial: bool) -> dict[str, int]:
    return {w.name: (35 if i < 20 else 30) if initial else (25 if i < 20 else 20) for i, w in enumerate(WIDE)}


PROTECTED = Workload("do-not-disrupt-app", "900m", "450Mi", do_not_disrupt=True)
SMALL_ANTI = dataclasses.replace(SMALL, anti_affinity=True)
LARGE_ANTI = dataclasses.replace(LARGE, anti_affinity=True)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "basic",
        "basic_test.go",
        (SMALL, LARGE),
        (
            Phase(
                "scaleOut",
                "scale-out",
                {SMALL.name: 500, LARGE.name: 500},
                Thresholds(2 * MINUTE, 0.53, 0.65, 260, 0.50),
                15 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                {SMALL.name: 350, LARGE.name: 350},
                Thresholds(20 * MINUTE, None, None, 260, 0.25),
                20 * MINUTE,
            ),
        ),
    ),
    Scenario(
        "wideDeployments",
        "wide_deployments_test.go",
        WIDE,
        (
            Phase(
                "scaleOut",
                "scale-out",
                _wide_replicas(True),
                Thresholds(5 * MINUTE, 0.20, 0.20, 370, 0.70),
                20 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                _wide_replicas(False),
                Thresholds(40 * MINUTE, 0.20, 0.20, 340, 0.30),
                30 * MINUTE,
            ),
        ),
    ),
    Scenario(
        "hostNameSpreading",
        "host_name_spreading_test.go",
        (SMALL_SPREAD, LARGE),
        (
            Phase(
                "scaleOut",
                "scale-out",
                {SMALL.name: 500, LARGE.name: 500},
                Thresholds(5 * MINUTE, 0.38, 0.40, 680, 1.15),
                15 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                {SMALL.name: 350, LARGE.name: 350},
                Thresholds(None, 0.38, 0.40, 575, 1.00),
                30 * MINUTE,
            ),
        ),
    ),
    Scenario(
        "hostNameSpreadingXL",
        "host_name_spreading_xl_test.go",
        (SMALL_SPREAD, LARGE),
        (
            Phase(
                "scaleOut",
                "scale-out",
                {SMALL.name: 1000, LARGE.name: 1000},
                Thresholds(35 * MINUTE, 0.38, 0.40, 1330, 1.40),
                25 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                {SMALL.name: 700, LARGE.name: 700},
                Thresholds(35 * MINUTE, 0.38, 0.40, 1200, 1.70),
                25 * MINUTE,
            ),
        ),
    ),
    Scenario(
        "drift",
        "drift_performance_test.go",
        (
            dataclasses.replace(SMALL_SPREAD, name="hostname-spread-app"),
            dataclasses.replace(LARGE, name="standard-app"),
        ),
        (
            Phase(
                "initial",
                "scale-out",
                {"hostname-spread-app": 300, "standard-app": 300},
                Thresholds(5 * MINUTE, None, None, 425, 0.70),
                20 * MINUTE,
            ),
            Phase("drift", "drift", {}, Thresholds(50 * MINUTE, None, None, 470, 1.05), 30 * MINUTE),
        ),
    ),
    Scenario(
        "doNotDisrupt",
        "do_no_disrupt_test.go",
        (SMALL_SPREAD, LARGE, PROTECTED),
        (
            Phase(
                "scaleOut",
                "scale-out",
                {SMALL.name: 500, LARGE.name: 500, PROTECTED.name: 100},
                Thresholds(4 * MINUTE, 0.38, 0.40, 645, 1.10),
                15 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                {SMALL.name: 250, LARGE.name: 250},
                Thresholds(35 * MINUTE, 0.38, 0.40, 585, 0.80),
                25 * MINUTE,
            ),
        ),
    ),
    Scenario(
        "interference",
        "interference_test.go",
        (SMALL_ANTI, LARGE_ANTI),
        (
            Phase(
                "scaleOut", "scale-out", {SMALL.name: 500}, Thresholds(5 * MINUTE, 0.38, 0.40, 620, 0.90), 15 * MINUTE
            ),
            Phase(
                "interference",
                "scale-out",
                {SMALL.name: 250, LARGE.name: 500},
                Thresholds(10 * MINUTE, 0.38, 0.40, 1205, 1.30),
                5 * MINUTE,
            ),
            Phase(
                "consolidation",
                "consolidation",
                {SMALL.name: 400, LARGE.name: 200},
                Thresholds(25 * MINUTE, 0.38, 0.40, 820, 0.80),
                15 * MINUTE,
            ),
        ),
    ),
)


def nodepool() -> dict[str, Any]:
    """suite_test.go's NodePool: WhenEmptyOrUnderutilized after 30 s, 100 % budget, no limits, < 32 vCPUs."""
    body = demo.nodepool_manifest(consolidate_after="30s")
    body["spec"].pop("limits", None)
    body["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
    body["spec"]["template"]["spec"]["requirements"].append(
        {"key": labels.LABEL_INSTANCE_CPU, "operator": "Lt", "values": ["32"]}
    )
    return body


class Sampler:
    """A process's RSS every `SAMPLE_EVERY` seconds and its CPU time, between `start` and `stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss_mb: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu = 0.0
        self._wall = 0.0

    def start(self) -> None:
        self.rss_mb.clear()
        self._cpu, self._wall = remote_controller.cpu_s(self.pid), time.monotonic()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                self.rss_mb.append(remote_controller.rss_mb(self.pid))
            except FileNotFoundError:  # the controller exited: the phase's wait reports it, with its log
                return
            await asyncio.sleep(SAMPLE_EVERY)

    async def stop(self) -> tuple[float, float, float]:
        """(p95 RSS in MB, average CPU cores, CPU seconds) over the sampled span."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        cpu = remote_controller.cpu_s(self.pid) - self._cpu
        cores = cpu / max(time.monotonic() - self._wall, 1e-9)
        samples = sorted(self.rss_mb) or [remote_controller.rss_mb(self.pid)]
        p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
        return p95, cores, cpu


async def utilisation(api: Any) -> tuple[float, float, int]:
    """(mean CPU, mean memory requested / allocatable, nodes) over the live nodes karpy launched that run pods."""
    nodes = {
        n["metadata"]["name"]: n
        for n in await e2e._live_nodes(api)
        if labels.LABEL_NODEPOOL in n["metadata"].get("labels", {})
    }
    pods = await e2e._patiently(lambda: api.list(resources.PODS))
    requested: dict[str, dict[str, int]] = {}
    for pod in pods:
        name = pod["spec"].get("nodeName")
        if name not in nodes or pod["metadata"].get("deletionTimestamp"):
            continue
        totals = requested.setdefault(name, {"cpu": 0, "memory": 0})
        for container in pod["spec"].get("containers") or ():
            asked = (container.get("resources") or {}).get("requests") or {}
            for key in totals:
                if key in asked:
                    totals[key] += quantity.parse(str(asked[key]))
    shares: dict[str, list[float]] = {"cpu": [], "memory": []}
    for name, totals in requested.items():
        allocatable = nodes[name]["status"].get("allocatable") or {}
        for key, share in shares.items():
            whole = quantity.parse(str(allocatable.get(key, "0")))
            if whole > 0:
                share.append(totals[key] / whole)
    mean = lambda values: statistics.fmean(values) if values else 0.0  # noqa: E731
    return mean(shares["cpu"]), mean(shares["memory"]), len(nodes)


async def _node_names(api: Any) -> frozenset[str]:
    return frozenset(n["metadata"]["name"] for n in await e2e._live_nodes(api))


def draining(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes upstream's report counts as draining: being deleted, or tainted `karpenter.sh/disrupted`."""
    return [
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"].get("deletionTimestamp")
        or any(t.get("key") == labels.TAINT_DISRUPTED_KEY for t in (n.get("spec") or {}).get("taints") or ())
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Settled:
    """When a consolidation or drift phase was over, and what upstream's report would have said of it."""

    end: float
    """Monotonic time the phase was over, the stable window included."""
    upstream_end: float
    """Monotonic time upstream's report would have stopped its clock: `end`, or its monitor's `timeout` after the
    pods were healthy if the nodes were still draining then (report.go `monitorConsolidationRounds` and ReportDrift's
    loop return at their timeout without failing the test)."""
    draining_at_upstream_timeout: bool
    """Whether nodes were still draining when upstream's monitor would have returned."""
    done: bool = True
    """False: nodes were still draining when the benchmark's own wait ran out."""


async def _settle_disruption(
    api: Any, expected_pods: int, *, within: float, monitor: float, before: frozenset[str] = frozenset()
) -> Settled:
    """Upstream's `monitorConsolidationRounds` (report.go): the phase is over once its pods are all running and no
    node has been draining for `STABLE` seconds (for drift, also once every node of `before` is gone), here given
    up to `within` where upstream's monitor returns `monitor` seconds after the pods are healthy, done or not."""
    start = time.monotonic()
    await e2e._until(lambda: e2e._settled(api, expected_pods), within=within, what="pods settled", step=2.0)
    upstream_end = time.monotonic() + monitor
    last_draining = time.monotonic()
    draining_then: bool | None = None
    while time.monotonic() - start < within:
        items, _ = await api.list(resources.NODES)
        names = {n["metadata"]["name"] for n in items}
        busy = bool(draining(items) or names & before)
        if draining_then is None and time.monotonic() >= upstream_end:
            draining_then = busy
        if busy:
            last_draining = time.monotonic()
        elif time.monotonic() - last_draining >= STABLE:
            now = time.monotonic()
            return Settled(now, min(now, upstream_end), draining_at_upstream_timeout=bool(draining_then))
        await asyncio.sleep(5.0)
    now = time.monotonic()
    return Settled(now, min(now, upstream_end), draining_at_upstream_timeout=draining_then is not False, done=False)


def _margins(figures: Mapping[str, float], limits: Thresholds) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value, upper in (
        ("total_time_s", figures["total_time_s"], True),
        ("cpu_util", figures["cpu_util"], False),
        ("memory_util", figures["memory_util"], False),
        ("memory_mb", figures["controller_p95_memory_mb"], True),
        ("cpu_cores", figures["controller_avg_cpu_cores"], True),
    ):
        limit = getattr(limits, key)
        if limit is None:
            continue
        met = value < limit if upper else value > limit
        margin = (limit / value if value else float("inf")) if upper else (value / limit)
        out[key] = {"threshold": limit, "met": met, "margin": round(margin, 2)}
    return out


async def run_scenario(
    scenario: Scenario,
    *,
    within: float | None,
    profile: pathlib.Path | None = None,
    last_phase: str | None = None,
    logs: pathlib.Path | None = None,
    memory_report: pathlib.Path | None = None,
    scheduler_qps: float = cluster.ClusterOptions().scheduler_qps,
) -> dict[str, Any]:
    options = cluster.ClusterOptions(
        cluster_name=f"perf-{scenario.name.lower()}", boot_delay=2.0, interval=0.5, scheduler_qps=scheduler_qps
    )
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "upstream": scenario.source,
        "scheduler_qps": scheduler_qps,
        "phases": [],
    }
    launcher = [sys.executable]
    if profile is not None:
        launcher += [str(PROFILED_RUN), str(profile / scenario.name)]
    elif memory_report is not None:
        launcher += [str(TRACED_RUN), str(memory_report / f"{scenario.name}.jsonl")]
    with contextlib.ExitStack() as kept:
        workdir = (
            logs / scenario.name
            if logs is not None
            else pathlib.Path(kept.enter_context(tempfile.TemporaryDirectory()))
        )
        async with remote.RemoteCluster(options) as emulated:
            api = emulated.client
            await api.create(
                resources.EC2NODECLASSES,
                demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name),
            )
            await api.create(resources.NODEPOOLS, nodepool())
            async with remote_controller.KarpyRun(emulated, workdir=workdir, launcher=launcher) as controller:
                out["catalog_warmup_s"] = round(await controller.warm_up(api, within=within or WARM_UP), 1)
                await _phases(
                    scenario,
                    api,
                    controller,
                    out,
                    api_url=emulated.api_url,
                    within=within,
                    last_phase=last_phase,
                    report=memory_report is not None,
                    profile=None if profile is None else profile / scenario.name,
                )
                out["controller_exit"] = await controller.stop()
    out["all_met"] = all(t["met"] for p in out["phases"] for t in p["thresholds"].values()) and not any(
        p["error"] for p in out["phases"]
    )
    return out


async def _phases(
    scenario: Scenario,
    api: Any,
    controller: remote_controller.KarpyRun,
    out: dict[str, Any],
    *,
    api_url: str,
    within: float | None,
    last_phase: str | None,
    report: bool = False,
    profile: pathlib.Path | None = None,
) -> None:
    """Run the scenario's phases in order, each phase's row appended to `out["phases"]`; with `report`, the
    controller writes a memory report at the end of each (`bench/traced_run.py`, on SIGUSR1); with `profile` (the
    controller runs under `bench/profiled_run.py` with this prefix), a profile of each phase and of what came
    before it."""
    replicas = {w.name: 0 for w in scenario.workloads}
    by_name = {w.name: w for w in scenario.workloads}
    sampler = Sampler(controller.pid)
    segments = 0

    async def cut_profile(name: str) -> None:
        nonlocal segments
        if profile is not None:
            segments += 1
            await _cut_profile(controller.pid, profile, segments, name)

    async def settled(pods: int) -> bool:
        controller.check()  # a controller that exited ends the run with its log, not a phase timing out
        return await e2e._settled(api, pods)

    for phase in scenario.phases:
        before = await _node_names(api)
        load = os.getloadavg()
        counted = await e2e.request_counts(api_url)
        await cut_profile(f"before-{phase.name}")
        sampler.start()
        start = time.monotonic()
        if phase.kind == "drift":
            patch = {
                "spec": {"template": {"metadata": {"annotations": {"test-drift-trigger": f"drift-{int(time.time())}"}}}}
            }
            await api.patch(resources.NODEPOOLS, "default", patch)
        for name, count in phase.replicas.items():
            if replicas[name] == 0:
                await api.create(workloads.DEPLOYMENTS, by_name[name].manifest(count))
            else:
                await api.patch(workloads.DEPLOYMENTS, name, {"spec": {"replicas": count}}, namespace="default")
            replicas[name] = count
        expected = sum(replicas.values())
        limit = within if within is not None else phase.wait_s
        error = None
        upstream: dict[str, Any] = {}
        try:
            if phase.kind == "scale-out":
                await e2e._until(lambda n=expected: settled(n), within=limit, what="all pods bound", step=1.0)
                end = time.monotonic()
            else:
                settled_at = await _settle_disruption(
                    api,
                    expected,
                    within=limit,
                    monitor=phase.timeout_s,
                    before=before if phase.kind == "drift" else frozenset(),
                )
                end = settled_at.end
                if not settled_at.done:
                    error = f"nodes still draining after {limit:.0f}s"
                upstream = {
                    "upstream_report_time_s": round(settled_at.upstream_end - start, 1),
                    "draining_at_upstream_timeout": settled_at.draining_at_upstream_timeout,
                }
        except TimeoutError as exc:
            error, end = str(exc), time.monotonic()
        p95, cores, cpu_s = await sampler.stop()
        await cut_profile(phase.name)
        if report:
            os.kill(controller.pid, signal.SIGUSR1)
        requests = e2e.counted_since(counted, await e2e.request_counts(api_url))
        cpu_util, memory_util, nodes = await utilisation(api)
        figures = {
            "total_time_s": round(end - start, 1),
            "cpu_util": round(cpu_util, 3),
            "memory_util": round(memory_util, 3),
            "controller_p95_memory_mb": round(p95, 1),
            "controller_avg_cpu_cores": round(cores, 3),
        }
        out["phases"].append(
            {
                "phase": phase.name,
                "kind": phase.kind,
                "pods": expected,
                "nodes": nodes,
                "wait_s": limit,
                **upstream,
                **figures,
                "thresholds": _margins(figures, phase.thresholds),
                "loadavg_before": [round(x, 2) for x in load],
                "controller_cpu_s": round(cpu_s, 2),
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                "requests": requests,
                "error": error,
            }
        )
        if error is not None or phase.name == last_phase:
            break


async def _cut_profile(pid: int, prefix: pathlib.Path, segment: int, name: str) -> None:
    """Have the controller write its profile since the last cut (`bench/profiled_run.py`: `PREFIX.<segment>.prof`,
    on SIGUSR1) and name it `PREFIX.<name>.prof`."""
    os.kill(pid, signal.SIGUSR1)
    written = prefix.with_name(f"{prefix.name}.{segment}.prof")
    deadline = time.monotonic() + PROFILE_WRITTEN_WITHIN
    while not written.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the controller wrote no profile {written} within {PROFILE_WRITTEN_WITHIN:.0f}s")
        await asyncio.sleep(0.1)
    written.replace(prefix.with_name(f"{prefix.name}.{name}.prof"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object per scenario (JSON lines)")
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS), help="comma-separated names")
    parser.add_argument(
        "--within",
        type=float,
        help="seconds before every phase gives up (default: each phase's own, the longer of upstream's timeout and "
        "total-time threshold)",
    )
    parser.add_argument("--profile", type=pathlib.Path, help="a cProfile of the controller: DIR/<scenario>.prof")
    parser.add_argument(
        "--memory-report",
        type=pathlib.Path,
        help="run the controller under tracemalloc (bench/traced_run.py): DIR/<scenario>.jsonl, a row per phase",
    )
    parser.add_argument("--logs", type=pathlib.Path, help="keep the controller's log: DIR/<scenario>/karpy.log")
    parser.add_argument("--stop-after", metavar="PHASE", help="end each scenario after its phase of this name")
    e2e.add_scheduler_qps(parser)
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if s.name in args.scenarios.split(",")]
    unknown = set(args.scenarios.split(",")) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}; known: {[s.name for s in SCENARIOS]}")
    if args.profile is not None and args.memory_report is not None:
        parser.error("--profile and --memory-report each run the controller under their own tool: choose one")
    for directory in (args.profile, args.memory_report):
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
    if args.memory_report is not None:  # the controller appends a row per phase: start each scenario's file afresh
        for scenario in chosen:
            (args.memory_report / f"{scenario.name}.jsonl").unlink(missing_ok=True)
    for scenario in chosen:  # each with an emulation and a controller of its own: nothing carries to the next
        row = asyncio.run(
            run_scenario(
                scenario,
                within=args.within,
                profile=args.profile,
                last_phase=args.stop_after,
                logs=args.logs,
                memory_report=args.memory_report,
                scheduler_qps=args.scheduler_qps,
            )
        )
        print(json.dumps(row) if args.json else json.dumps(row, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
