"""Where the controller's memory goes before its first pod (not a test).

Each step is what `karpy run` does, in its order, in this one process; after each, the process's RSS (VmRSS of
/proc/self/status) and, with `--tracemalloc`, the bytes Python's allocator holds and its peak since the previous
step:
- `python`: the interpreter and this script;
- `imports`: the modules `karpy run` imports (`karpy.cli`, `karpy.operator.main`, and the AWS provider's modules the
  object graph imports at build: `karpy.wiring.graph.aws_cloud`);
- `clients`: the boto3 clients the AWS provider builds (`karpy.cloudprovider.aws.factory`), which load their
  service models (nothing is sent);
- `first solve` (with `--solve`): a provisioning solve of `SOLVE_PODS` pods of bench/scheduling.py's diverse mix
  over the bundled AWS catalog, as the provisioner asks it (no lower bound), whose repack imports the LP solver and
  solves its first LPs;
- `started` (with `--start`): the controller started against an emulated cluster in a child process, as
  `bench/performance.py` runs it, until it holds its catalog; the emulator's own modules are imported first and
  reported as the step `emulator imports`, since a real controller does without them.
`packages` lists which large third-party packages the process has imported by then. `--plain-session` builds the
clients from a plain boto3 session (botocore's loader as it comes, documentation kept), to compare.
tracemalloc slows imports and holds memory of its own: read RSS from a run without it.

    .venv/bin/python bench/startup_memory.py --json
    .venv/bin/python bench/startup_memory.py --json --tracemalloc
    .venv/bin/python bench/startup_memory.py --json --solve
    .venv/bin/python bench/startup_memory.py --json --start
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import tracemalloc
from typing import Any

REGION = "us-west-2"
WATCHED = (
    "numpy",
    "scipy",
    "highspy",
    "kopf",
    "kubernetes",
    "yaml",
    "aiohttp",
    "boto3",
    "botocore",
    "moto",
    "kmock",
    "google",
)
"""Packages large enough to show in RSS when imported."""
RUN_IMPORTS = (
    "karpy.cli",
    "karpy.operator.main",
    "karpy.cloudprovider.aws.startup",
    "karpy.cloudprovider.aws.factory",
    "karpy.cloudprovider.aws.provider",
    "karpy.cloudprovider.aws.ec2batch",
)
"""What `karpy run` imports before it starts: the CLI, the operator (cli._run), and what `graph.aws_cloud` imports."""
SOLVE_PODS = 300


def _first_solve() -> int:
    """Solve as the provisioner does (`compute_lower_bound=False`, provisioning/snapshot.py) and return how many
    NodeClaims it planned."""
    import dataclasses

    import scheduling
    from karpy.api import meta, nodepool
    from karpy.cloudprovider import catalog
    from karpy.scheduling import pods, scheduler

    pool = nodepool.NodePool(
        metadata=meta.ObjectMeta(name="default"),
        template=nodepool.NodeClaimTemplate(
            node_class_ref=meta.NodeClassRef(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
        ),
    )
    pending = pods.from_manifests(scheduling.iter_pod_manifests(SOLVE_PODS, mix="diverse"))
    inp = scheduler.SchedulingInput(pods=pending, nodepools=[pool], instance_types={pool.name: catalog.load(REGION)})
    return len(scheduler.solve(dataclasses.replace(inp, compute_lower_bound=False)).new_nodeclaims)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class Steps:
    def __init__(self, *, traced: bool) -> None:
        self.traced = traced
        self.rows: list[dict[str, Any]] = []

    def record(self, name: str) -> None:
        row: dict[str, Any] = {"step": name, "rss_mb": round(_rss_mb(), 1)}
        if self.traced:
            current, peak = tracemalloc.get_traced_memory()
            row |= {"traced_mb": round(current / 2**20, 1), "traced_peak_mb": round(peak / 2**20, 1)}
            tracemalloc.reset_peak()
        row["packages"] = sorted(p for p in WATCHED if p in sys.modules)
        self.rows.append(row)


def _clients(*, plain: bool) -> Any:
    from karpy.cloudprovider.aws import clients, models, sessions

    if plain:
        import boto3.session

        return clients.build_clients(region=REGION, session=boto3.session.Session(region_name=REGION))
    # As `karpy run` builds them (karpy.cloudprovider.aws.factory): models cut down to the operations it calls.
    return clients.build_clients(region=REGION, session=sessions.session(REGION, operations=models.CALLED))


async def _start(steps: Steps, *, within: float) -> None:
    import e2e
    from karpy.kube import resources
    from karpy_emulator import cluster, controlplane, demo, remote

    steps.record("emulator imports")
    options = cluster.ClusterOptions(cluster_name="startup-memory", boot_delay=2.0, interval=0.5)
    async with remote.RemoteCluster(options) as emulated:
        await emulated.client.create(
            resources.EC2NODECLASSES,
            demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name),
        )
        await emulated.client.create(resources.NODEPOOLS, demo.nodepool_manifest(consolidate_after="30s"))
        plane = controlplane.ControlPlane(emulated, controlplane.Options(interruption=False, fast_catalog=False))
        async with plane:
            await e2e._warm_up(plane, within=within)
            steps.record("started")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--tracemalloc", action="store_true", help="also report Python's allocations (slower)")
    parser.add_argument("--plain-session", action="store_true", help="clients from a plain boto3 session")
    parser.add_argument("--solve", action="store_true", help="also run a first provisioning solve (the LP solver)")
    parser.add_argument("--start", action="store_true", help="also start the controller against an emulated cluster")
    parser.add_argument("--within", type=float, default=600.0, help="seconds to wait for the catalog (--start)")
    args = parser.parse_args(argv)
    if args.tracemalloc:
        tracemalloc.start()
    steps = Steps(traced=args.tracemalloc)
    steps.record("python")
    for name in RUN_IMPORTS:
        importlib.import_module(name)
    steps.record("imports")
    built = _clients(plain=args.plain_session)
    steps.record("clients")
    if args.solve:
        planned = _first_solve()
        steps.record("first solve")
        steps.rows[-1]["nodeclaims"] = planned
    if args.start:
        asyncio.run(_start(steps, within=args.within))
    del built
    out = {"plain_session": args.plain_session, "tracemalloc": args.tracemalloc, "steps": steps.rows}
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
