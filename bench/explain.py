"""Explain benchmark: `karpy explain` on the dump of a large cluster, as a user runs it (not a test).

The dump (`karpy_emulator.dumps`): by default 5,000 m5.2xlarge nodes with their NodeClaims, 10 pods of 250m / 512Mi on
each (50,000 pods, about 2.5 KB of JSON each), 20 pending pods, every 7th node's first pod under a PDB that allows
no disruption, every 11th node with a do-not-disrupt pod, a budget of 10%; written as one JSON List, as
`kubectl get nodepools,ec2nodeclasses,nodeclaims,nodes,pods,pdbs -A -o json` writes it. Then `karpy explain -f
DUMP -o json` runs with the CLI's defaults in a child process, timed from its start to its exit: `explain_s` (wall),
`explain_cpu_s` (the child's CPU time: the shared machine's load distorts it less) and `peak_rss_mb`. With
`--yaml`, the same dump as YAML is timed too (`explain_yaml_s`): reading YAML is what makes it slow; with `--phases`,
each step's CPU time, measured again in this process (`phases_cpu`).

    .venv/bin/python bench/explain.py --json
    .venv/bin/python bench/explain.py --json --nodes 500 --pods-per-node 10
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from karpy.api import decoding
from karpy_emulator import dumps

TARGET_S = 10.0
CHILD = "import sys; from karpy import cli; sys.exit(cli.main(sys.argv[1:]))"


def run_explain(path: Path, now: str) -> tuple[dict[str, Any], float, float, float]:
    """(the JSON explanation, wall seconds, CPU seconds, peak RSS MB) of one `karpy explain` child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "explain", "-f", str(path), "-o", "json", "--now", now],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc, wall, cpu, after.ru_maxrss / 1024


def phases(path: Path, now: float) -> dict[str, float]:
    """CPU seconds of each step `karpy explain` takes (`karpy.explain.command.explain`, step by step, in this
    process, with the collector paused as the command pauses it)."""
    from karpy import clock as karpy_clock
    from karpy.explain import catalogs, pending, repack, run, sources, verdicts
    from karpy.kube import resources
    from karpy.simulate import plan

    out: dict[str, float] = {}
    mark = time.process_time()

    def step(name: str) -> None:
        nonlocal mark
        out[name] = round(time.process_time() - mark, 2)
        mark = time.process_time()

    clock = karpy_clock.ManualClock(now)
    gc.disable()
    try:
        snap = sources.read_dump([str(path)])
        step("read_s")
        cluster, _ = sources.to_cluster(snap, clock=clock)
        step("model_s")
        region = catalogs.region_of(cluster.objects(resources.NODES))
        types = catalogs.instance_types(cluster.nodepools(), cluster.nodeclasses(), plan.Options(region=region))
        prepared = run.prepare(cluster, types, clock=clock)
        step("prepare_s")
        found = verdicts.explain(prepared.ctx, price=prepared.price)
        step("verdicts_s")
        assert prepared.batch is not None
        assert prepared.repack is not None
        pending.explain(prepared.batch)
        step("pending_s")
        repack.explain(prepared.repack, price=prepared.price)
        step("repack_s")
        out["simulations"] = found.simulations
    finally:
        gc.enable()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--yaml", action="store_true", help="also time the same dump written as YAML")
    parser.add_argument("--phases", action="store_true", help="also time each step, in this process (CPU seconds)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default prints it too)")
    args = parser.parse_args()
    shape = dumps.Shape(
        nodes=args.nodes,
        pods_per_node=args.pods_per_node,
        pending=20,
        guarded_every=7,
        pinned_every=11,
        budget="10%",
    )
    now = decoding.format_timestamp(shape.now)
    with tempfile.TemporaryDirectory(prefix="karpy-bench-explain-") as tmp:
        dump = dumps.dump(shape)
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(dump))
        doc, wall, cpu, rss = run_explain(path, now)
        out: dict[str, Any] = {
            "nodes": args.nodes,
            "pods": args.nodes * args.pods_per_node + shape.pending,
            "dump_mb": round(path.stat().st_size / 1e6, 1),
            "explain_s": round(wall, 2),
            "explain_cpu_s": round(cpu, 2),
            "peak_rss_mb": round(rss),
            "target_s": TARGET_S,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "simulations": doc["simulations"],
            "verdicts": dict(collections.Counter(n["verdict"] for n in doc["nodes"])),
            "next_pass": {k: v for k, v in (doc["next_pass"] or {}).items() if k in ("method", "decision")}
            | {"nodes": len((doc["next_pass"] or {}).get("nodes", []))},
            "pending_unschedulable": sum(1 for p in doc["pending"] if not p["schedulable"]),
            "repack": {k: v for k, v in (doc["repack"] or {}).items() if k != "nodeclaims"},
        }
        if args.phases:
            out["phases_cpu"] = phases(path, shape.now)
        if args.yaml:
            yaml_path = Path(tmp) / "dump.yaml"
            yaml_path.write_text(yaml.dump(dump, Dumper=yaml.CSafeDumper))
            _, yaml_wall, yaml_cpu, _ = run_explain(yaml_path, now)
            out |= {"explain_yaml_s": round(yaml_wall, 2), "explain_yaml_cpu_s": round(yaml_cpu, 2)}
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
