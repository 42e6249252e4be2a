"""Plan benchmark: `karpy plan` of a NodePool change over the dump of a large cluster, as a user runs it (not a test).

The dump is explain's (`karpy_emulator.dumps`, see bench/explain.py): by default 5,000 m5.2xlarge nodes with 10 pods
each (50,000 pods), every 7th node's first pod under a PDB that allows no disruption, every 11th with a
do-not-disrupt pod, a Drifted budget of 10%. The proposal changes the pool's `expireAfter`, so every node drifts and
every pod is solved again onto the proposed pool: the most work a plan does. `karpy plan -f P --dump D -o json`
runs in a child process, timed from its start to its exit: `plan_s` (wall), `plan_cpu_s` (the child's CPU time: the
shared machine's load distorts it less) and `peak_rss_mb`.

    .venv/bin/python bench/plan.py --json
    .venv/bin/python bench/plan.py --json --nodes 500
"""

from __future__ import annotations

import argparse
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

TARGET_S = 15.0
CHILD = "import sys; from karpy import cli; sys.exit(cli.main(sys.argv[1:]))"


def run_plan(proposal: Path, dump: Path, now: str) -> tuple[dict[str, Any], float, float, float]:
    """(the JSON plan, wall seconds, CPU seconds, peak RSS MB) of one `karpy plan` child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "plan", "-f", str(proposal), "--dump", str(dump), "-o", "json", "--now", now],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 2):
        raise SystemExit(f"karpy plan exited {done.returncode}: {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc, wall, cpu, after.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default prints it too)")
    args = parser.parse_args()
    shape = dumps.Shape(
        nodes=args.nodes, pods_per_node=args.pods_per_node, guarded_every=7, pinned_every=11, budget="10%"
    )
    now = decoding.format_timestamp(shape.now)
    proposed = dumps.nodepool(shape)
    proposed["spec"]["template"]["spec"]["expireAfter"] = "360h"
    with tempfile.TemporaryDirectory(prefix="karpy-bench-plan-") as tmp:
        dump, proposal = Path(tmp) / "dump.json", Path(tmp) / "proposal.yaml"
        dump.write_text(json.dumps(dumps.dump(shape)))
        proposal.write_text(yaml.safe_dump(proposed))
        doc, wall, cpu, rss = run_plan(proposal, dump, now)
    (pool,) = doc["nodepools"]
    out = {
        "nodes": args.nodes,
        "pods": args.nodes * args.pods_per_node,
        "plan_s": round(wall, 2),
        "plan_cpu_s": round(cpu, 2),
        "peak_rss_mb": round(rss),
        "target_s": TARGET_S,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "drifts": pool["drifts"],
        "waves": len(pool["waves"]),
        "largest_wave": pool["largest_wave"],
        "finish": pool["finish"],
        "pods_moved": doc["pods_moved"],
        "unschedulable": len(doc["unschedulable"]),
        "capacity": doc["capacity"],
    }
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
