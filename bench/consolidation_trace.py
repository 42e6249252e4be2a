"""Where a performance scenario's consolidation spends its time, command by command (not a test).

A scenario of `bench/performance.py` (wideDeployments unless told) runs its scale-out and then its consolidation on
virtual time, in this process: a fresh emulation and controller share an `autojump.AutojumpClock` (as
`bench/e2e.py`'s consolidation phase), so every timer of upstream's timings counts in full and the controller's own
work counts as instantaneous: the figures show the pace the timers set, whatever the machine's load. `--scale`
multiplies every replica count (rounded, at least 1) for a scaled-down copy.

From the consolidation phase's start until no node has been draining for `performance.STABLE` seconds with every
pod bound, it records from the disruption loop's own log lines, at virtual time:
- each command: its method, decision, NodeClaims, when it was decided, and when its replacements were all
  Initialized and the candidates deleted (`launch_s`: from the decision until then) or the command given up;
- each command that failed validation (method, nodes, the failure kind `churn` / `budget` / `scheduling`);
- each candidate NodeClaim's way out: from the queue's delete until the NodeClaim left the API server, its Node
  drained and its instance terminated (`drain_s`);
- the timeline of live nodes;
- the CPU seconds of each step of the disruption loop (`Cpu`: the pass's snapshot, each method's compute, each
  validation), in all and per command: what the wall clock adds to each command beyond the timers.
The summary counts commands per method and decision, nodes per command, validation failures per method and kind,
and the mean and largest validation, launch and drain times; the load averages and the wall time are printed
beside them.

`--trials` also records every multi-node trial (a consolidation simulation of two or more candidates: a prefix of
the binary search, or its validation): how many candidates, how many new NodeClaims it needed, and, when it needed
several, why one would not do (`Trials.why_several`): `too-big` (their pods' requests exceed every instance type open
to them, so no single replacement can hold them), `zones` (topology spread or volumes pinned the new claims to
different zones), `hostname` (two of their pods may not share a node), `other`; and the share of the other nodes
inside their consolidateAfter window, where the candidates' pods may not go.

    .venv/bin/python bench/consolidation_trace.py --json --scale 0.3
    .venv/bin/python bench/consolidation_trace.py --json --scenario basic --scale 0.2
    .venv/bin/python bench/consolidation_trace.py --json --scale 0.3 --trials
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import e2e
import performance
from karpy import clock as karpy_clock
from karpy.api import labels
from karpy.disruption import candidates as disruption_candidates
from karpy.disruption import methods as disruption_methods
from karpy.disruption import passes, simulation, validation
from karpy.kube import resources
from karpy.scheduling import results
from karpy_emulator import autojump, cluster, controlplane, demo, workloads


class Trace(logging.Handler):
    """The disruption loop's decisions, validation failures and completed commands, at virtual time."""

    def __init__(self, clock: karpy_clock.Clock) -> None:
        super().__init__(logging.INFO)
        self._clock = clock
        self.decided: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []
        self.deleted: dict[str, float] = {}
        """NodeClaim -> when the queue deleted it."""
        self.failed: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        now = self._clock.now()
        message = record.msg
        if message.startswith("disrupting nodeclaim(s)"):
            self.decided.append(
                {
                    "at": now,
                    "method": getattr(record, "method", ""),
                    "decision": getattr(record, "decision", ""),
                    "nodeclaims": list(getattr(record, "nodeclaims", ())),
                }
            )
        elif message.startswith("abandoning disruption command"):
            why = record.args[0] if isinstance(record.args, tuple) and record.args else None
            self.rejected.append(
                {
                    "at": now,
                    "method": getattr(record, "method", ""),
                    "nodes": len(getattr(record, "nodeclaims", ())),
                    "failure": str(getattr(why, "failure", "")),
                    "why": str(why),
                }
            )
        elif message.startswith("deleted disrupted nodeclaim(s)"):
            for name in getattr(record, "nodeclaims", ()):
                self.deleted[name] = now
        elif message.startswith("disruption command failed"):
            self.failed.append({"at": now, "why": str(record.args[0] if record.args else "")})


class Trials:
    """Every consolidation simulation of two or more candidates, while `recording()` is on."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Wraps `simulation.simulate`, which each disruption pass binds anew (`disruption.passes`)."""
        original = simulation.simulate

        def simulate(
            snap: simulation.Snapshot, chosen: Sequence[disruption_candidates.Candidate], **kwargs: Any
        ) -> simulation.Simulation:
            out = original(snap, chosen, **kwargs)
            if len(chosen) >= 2 and kwargs.get("consolidation", True):
                self.rows.append(self.row(snap, chosen, out))
            return out

        simulation.simulate = simulate
        try:
            yield
        finally:
            simulation.simulate = original

    @staticmethod
    def row(
        snap: simulation.Snapshot, chosen: Sequence[disruption_candidates.Candidate], sim: simulation.Simulation
    ) -> dict[str, Any]:
        leaving = {c.node.name for c in chosen}
        others = [n.name for n in snap.existing if n.name not in leaving]
        return {
            "candidates": len(chosen),
            "new_claims": len(sim.replacements),
            "all_scheduled": sim.all_scheduled,
            "why_several": Trials.why_several(sim.replacements) if len(sim.replacements) > 1 else "",
            "settling_share": round(sum(1 for n in others if n in snap.settling) / len(others), 2) if others else 0.0,
        }

    @staticmethod
    def why_several(claims: Sequence[results.PlannedNodeClaim]) -> str:
        """`too-big` when no instance type open to every claim holds all their pods' requests, `zones` when the
        claims are pinned to different zones, `hostname` when two of their pods may not share a node (hostname
        anti-affinity or spread), `other` otherwise."""
        asked: collections.Counter[str] = collections.Counter()
        for claim in claims:
            for pod in claim.pods:
                asked.update(pod.requests)
        common = set.intersection(*({t.name for t in c.instance_type_options} for c in claims))
        types = [t for t in claims[0].instance_type_options if t.name in common]
        if not any(all(v <= t.allocatable.get(k, 0) for k, v in asked.items()) for t in types):
            return "too-big"
        zones: set[str] = set()
        for claim in claims:
            req = claim.requirements.get(labels.LABEL_ZONE)
            found = req.values() if req is not None else None
            if found is not None and len(found) == 1:
                zones |= found
        if len(zones) > 1:
            return "zones"
        apart = collections.Counter(
            p.labels.get("app", p.key)
            for c in claims
            for p in c.pods
            if any(t.topology_key == labels.LABEL_HOSTNAME for t in (*p.anti_affinity, *p.spread))
        )
        return "hostname" if any(n > 1 for n in apart.values()) else "other"

    def summary(self) -> dict[str, Any]:
        several = [r for r in self.rows if r["new_claims"] > 1]
        return {
            "trials": len(self.rows),
            "needed_several_claims": len(several),
            "why_several": dict(sorted(collections.Counter(r["why_several"] for r in several).items())),
            "two_node_trials": sum(1 for r in self.rows if r["candidates"] == 2),
            "two_node_why_several": dict(
                sorted(collections.Counter(r["why_several"] for r in several if r["candidates"] == 2).items())
            ),
            "settling_share": _stats([r["settling_share"] for r in self.rows]),
            "at_most_one_claim": sum(1 for r in self.rows if r["new_claims"] <= 1 and r["all_scheduled"]),
        }


class Cpu:
    """The controller's CPU seconds per step of the disruption loop, while `recording()` is on: what virtual time
    counts as instantaneous and the wall clock does not (each step timed with `time.thread_time`, on the thread that
    runs it: the event loop's)."""

    STEPS: tuple[tuple[Any, str], ...] = (
        (passes, "context"),
        (validation, "validate"),
        (disruption_methods.Emptiness, "compute"),
        (disruption_methods.Drift, "compute"),
        (disruption_methods.MultiNodeConsolidation, "compute"),
        (disruption_methods.SingleNodeConsolidation, "compute"),
    )

    def __init__(self) -> None:
        self.seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        originals = [(owner, name, getattr(owner, name)) for owner, name in self.STEPS]
        for owner, name, original in originals:
            setattr(owner, name, self._timed(f"{getattr(owner, '__name__', owner)}.{name}", original))
        try:
            yield
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)

    def _timed(self, label: str, original: Any) -> Any:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label.removeprefix("karpy.disruption.")] += time.thread_time() - start
                self.calls[label.removeprefix("karpy.disruption.")] += 1

        return timed

    def clear(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def summary(self, commands: int) -> dict[str, Any]:
        """Per step: calls, CPU seconds in all and per command decided."""
        return {
            label: {
                "calls": self.calls[label],
                "cpu_s": round(seconds, 2),
                "cpu_s_per_command": round(seconds / commands, 3) if commands else None,
            }
            for label, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])
        }


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"n": len(values), "mean": round(statistics.fmean(values), 1), "max": round(max(values), 1)}


def summary(trace: Trace, gone: Mapping[str, float], *, start: float, validation_delay: float) -> dict[str, Any]:
    """Per method and decision: commands, nodes per command, validation failures, and validation, launch and drain
    times (virtual seconds)."""
    commands = []
    for c in trace.decided:
        deleted = [trace.deleted[n] for n in c["nodeclaims"] if n in trace.deleted]
        drains = [gone[n] - trace.deleted[n] for n in c["nodeclaims"] if n in trace.deleted and n in gone]
        commands.append(
            {
                "at_s": round(c["at"] - start, 1),
                "method": c["method"],
                "decision": c["decision"],
                "nodes": len(c["nodeclaims"]),
                "launch_s": round(max(deleted) - c["at"], 1) if deleted else None,
                "drain_s": round(max(drains), 1) if drains else None,
            }
        )
    by_kind: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for c in commands:
        by_kind[f"{c['method']}/{c['decision']}"].append(c)
    failures = collections.Counter(f"{r['method']}/{r['failure']}" for r in trace.rejected)
    return {
        "commands": len(commands),
        "nodes_disrupted": sum(c["nodes"] for c in commands),
        "per_kind": {
            kind: {
                "commands": len(cs),
                "nodes": sum(c["nodes"] for c in cs),
                "nodes_per_command": _stats([c["nodes"] for c in cs]),
                "launch_s": _stats([c["launch_s"] for c in cs if c["launch_s"] is not None]),
                "drain_s": _stats([c["drain_s"] for c in cs if c["drain_s"] is not None]),
            }
            for kind, cs in sorted(by_kind.items())
        },
        "validation_s_each": validation_delay,
        "validations": len(commands) + len(trace.rejected),
        "validation_failures": dict(sorted(failures.items())),
        "validation_failed_nodes": sum(r["nodes"] for r in trace.rejected),
        "validation_failure_examples": sorted({r["why"] for r in trace.rejected})[:8],
        "queue_failures": len(trace.failed),
        "command_list": commands,
    }


def _scaled(replicas: Mapping[str, int], scale: float) -> dict[str, int]:
    return {name: max(1, round(count * scale)) for name, count in replicas.items()}


async def run(
    scenario: performance.Scenario, *, scale: float, within: float, trials: Trials | None = None
) -> dict[str, Any]:
    wall = time.monotonic()
    load = os.getloadavg()
    options = cluster.ClusterOptions(
        cluster_name="karpy-trace", boot_delay=e2e.VIRTUAL_BOOT_DELAY, autojump=True, start_time=time.time()
    )
    by_name = {w.name: w for w in scenario.workloads}
    out: dict[str, Any] = {"scenario": scenario.name, "scale": scale, "loadavg_before": [round(x, 2) for x in load]}
    async with cluster.EmulatedCluster(options) as emulated:
        clock = emulated.clock
        if not isinstance(clock, autojump.AutojumpClock):
            raise TypeError("the trace needs the autojump clock")
        api = emulated.client
        nodeclass = demo.nodeclass_manifest(role=emulated.node_role, discovery=emulated.cluster_name)
        await api.create(resources.EC2NODECLASSES, nodeclass)
        await api.create(resources.NODEPOOLS, performance.nodepool())
        plane = controlplane.ControlPlane(emulated, controlplane.Options(interruption=False))
        trace = Trace(clock)
        logger = logging.getLogger("karpy.disruption")
        logger.addHandler(trace)
        logger.setLevel(logging.INFO)
        recording = contextlib.ExitStack()
        cpu = Cpu()
        recording.enter_context(cpu.recording())
        if trials is not None:
            recording.enter_context(trials.recording())
        try:
            async with plane:
                scale_out, consolidation = scenario.phases[0], scenario.phases[-1]
                first = _scaled(scale_out.replicas, scale)
                for name, count in first.items():
                    await api.create(workloads.DEPLOYMENTS, by_name[name].manifest(count))
                provisioned = await e2e._until(
                    lambda: e2e._settled(api, sum(first.values())),
                    within=within,
                    what="all pods bound",
                    step=1.0,
                    clock=clock,
                )
                out["scale_out_virtual_s"] = round(provisioned, 1)
                out["nodes_before"] = len(await e2e._live_nodes(api))
                trace.decided.clear()
                trace.rejected.clear()
                trace.deleted.clear()
                cpu.clear()
                if trials is not None:
                    trials.rows.clear()
                kept = {**first, **_scaled(consolidation.replicas, scale)}
                start = clock.now()
                for name, count in kept.items():
                    await api.patch(workloads.DEPLOYMENTS, name, {"spec": {"replicas": count}}, namespace="default")
                out["pods"] = sum(kept.values())
                seen: set[str] = set()
                gone: dict[str, float] = {}  # NodeClaim -> when it left the API server
                timeline: list[tuple[float, int]] = []
                last_draining = clock.now()
                while clock.now() - start < within:
                    await clock.sleep(1.0)
                    items, _ = await api.list(resources.NODES)
                    claims, _ = await api.list(resources.NODECLAIMS)
                    names = {c["metadata"]["name"] for c in claims}
                    for name in seen - names:
                        gone[name] = clock.now()
                    seen = names
                    live = sum(1 for n in items if not n["metadata"].get("deletionTimestamp"))
                    if not timeline or timeline[-1][1] != live:
                        timeline.append((round(clock.now() - start, 1), live))
                    if performance.draining(items) or not await e2e._settled(api, out["pods"]):
                        last_draining = clock.now()
                    elif clock.now() - last_draining >= performance.STABLE:
                        break
                out["consolidation_virtual_s"] = round(last_draining - start, 1)
                out["nodes_after"] = timeline[-1][1] if timeline else out["nodes_before"]
                out["done"] = clock.now() - start < within
                out.update(summary(trace, gone, start=start, validation_delay=plane.options.validation_delay))
                out["controller_cpu_per_step"] = cpu.summary(out["commands"])
                out["node_timeline"] = timeline
                if trials is not None:
                    out["multi_node_trials"] = trials.summary()
        finally:
            logger.removeHandler(trace)
            recording.close()
    out["wall_s"] = round(time.monotonic() - wall, 1)
    out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--scenario", default="wideDeployments", help="a scenario of bench/performance.py")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every replica count by this")
    parser.add_argument("--within", type=float, default=3600.0, help="virtual seconds before a phase gives up")
    parser.add_argument("--commands", action="store_true", help="include every command, not only the summary")
    parser.add_argument("--trials", action="store_true", help="break down the multi-node trials (see above)")
    args = parser.parse_args(argv)
    found = [s for s in performance.SCENARIOS if s.name == args.scenario]
    if not found:
        parser.error(f"unknown scenario {args.scenario}; known: {[s.name for s in performance.SCENARIOS]}")
    trials = Trials() if args.trials else None
    row = asyncio.run(run(found[0], scale=args.scale, within=args.within, trials=trials))
    if not args.commands:
        row.pop("command_list", None)
    print(json.dumps(row) if args.json else json.dumps(row, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
