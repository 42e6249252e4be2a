"""Scheduling benchmark: upstream's diverse workload against the fake 400-type catalog and the real AWS catalog.

Workload (core: pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go): equal fifths of generic pods,
zonal topology spread (maxSkew 1, DoNotSchedule), hostname topology spread, zonal self-affinity and hostname
self-anti-affinity;
CPU requests drawn from {100m, 250m, 500m, 1, 1.5}, memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}, label values
from {a..g}, all from a seeded generator so every run sees the same pods.

Each (catalog, pod count) runs in its own subprocess so `peak_rss_mb` is that run's own high-water mark. Only
`scheduler.solve` is timed, as upstream's benchmark times only Solve() (`seconds` wall, `cpu_seconds` the process's
CPU time: on a shared machine the wall clock also counts other processes). `cost_ratio` is cost / the lower bound
tightened by hostname rules, `cost_ratio_lp` cost / the LP relaxation alone. The `generic` rows run the
unconstrained mix alone: there cost_ratio is held to <= 1.05; on the diverse mix to <= 1.15.

    .venv/bin/python bench/scheduling.py --json                 # the full table (several minutes)
    .venv/bin/python bench/scheduling.py --json --sizes 1000,20000 --catalogs fake
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

SIZES = (1, 100, 1000, 5000, 20000, 100000)
CATALOGS = ("fake", "aws")
MIXES = ("diverse", "generic")
CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
VALUES = ("a", "b", "c", "d", "e", "f", "g")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _pod(rng: random.Random, index: int, labels: dict[str, str], spec_extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{index}", "namespace": "default", "uid": f"uid-{index}", "labels": labels},
        "spec": {
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}}}
            ],
            **spec_extra,
        },
    }


def _generic(rng: random.Random, i: int) -> dict[str, Any]:
    return _pod(rng, i, {"my-label": rng.choice(VALUES)}, {})


def _spread(key: str) -> Any:
    def make(rng: random.Random, i: int) -> dict[str, Any]:
        value = rng.choice(VALUES)
        constraint = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"my-label": value}},
        }
        return _pod(rng, i, {"my-label": value}, {"topologySpreadConstraints": [constraint]})

    return make


def _zonal_self_affinity(rng: random.Random, i: int) -> dict[str, Any]:
    value = rng.choice(VALUES)
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"my-affinity": value}}}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return _pod(rng, i, {"my-affinity": value}, {"affinity": affinity})


def _hostname_self_anti_affinity(rng: random.Random, i: int) -> dict[str, Any]:
    term = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "nginx"}}}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return _pod(rng, i, {"app": "nginx"}, {"affinity": affinity})


def iter_pod_manifests(count: int, *, mix: str, seed: int = 42) -> Iterator[dict[str, Any]]:
    """The benchmark's pods as Kubernetes manifests, one at a time (deterministic for a seed)."""
    rng = random.Random(seed)
    if mix == "generic":
        yield from (_generic(rng, i) for i in range(count))
        return
    kinds = (_generic, _spread(ZONE), _spread(HOSTNAME), _zonal_self_affinity, _hostname_self_anti_affinity)
    per_kind = count // len(kinds)
    index = 0
    for kind in kinds:
        for _ in range(per_kind):
            yield kind(rng, index)
            index += 1
    for i in range(index, count):  # the remainder, as upstream does
        yield _generic(rng, i)


def make_pod_manifests(count: int, *, mix: str, seed: int = 42) -> list[dict[str, Any]]:
    """The benchmark's pods as Kubernetes manifests (deterministic for a seed)."""
    return list(iter_pod_manifests(count, mix=mix, seed=seed))


def run_one(*, catalog: str, pods: int, mix: str, warm: bool = True, profile: str = "") -> dict[str, Any]:
    """One measured solve, in this process. Imports happen here so the parent stays light.

    `warm` imports the LP solver (scipy, imported lazily by the lower bound) before the timer starts, so the row
    measures solving rather than a one-off module import. `profile` writes cProfile stats of the solve there."""
    from karpy.api import meta, nodepool
    from karpy.cloudprovider import catalog as aws_catalog
    from karpy.cloudprovider.fake import generator
    from karpy.scheduling import pods as pod_model
    from karpy.scheduling import scheduler

    pool = nodepool.NodePool(
        metadata=meta.ObjectMeta(name="default"),
        template=nodepool.NodeClaimTemplate(
            node_class_ref=meta.NodeClassRef(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
        ),
    )
    types = generator.instance_types(400) if catalog == "fake" else aws_catalog.load("us-east-1")
    # Parsed as generated (never all manifests alive at once) and through one interner, as a controller parsing a
    # watch stream would: pods stamped from one template share their labels, requests and constraints.
    pending = pod_model.from_manifests(iter_pod_manifests(pods, mix=mix))
    inp = scheduler.SchedulingInput(pods=pending, nodepools=[pool], instance_types={pool.name: types})
    if warm:
        importlib.import_module("scipy.optimize")
        importlib.import_module("scipy.sparse")
    profiler = cProfile.Profile() if profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    results = scheduler.solve(inp)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    placed = sum(len(claim.pods) for claim in results.new_nodeclaims)
    return {
        "catalog": catalog,
        "mix": mix,
        "pods": pods,
        "instance_types": len(types),
        "seconds": round(seconds, 4),
        # CPU time of the solve: on a shared machine the wall clock also counts other processes' turns
        "cpu_seconds": round(cpu_seconds, 4),
        "pods_per_sec": round(pods / seconds, 1) if seconds > 0 else None,
        "scheduled": placed,
        "unschedulable": len(results.unschedulable),
        "nodes": len(results.new_nodeclaims),
        "cost": round(results.cost_per_hour, 4),
        "lower_bound": round(results.lower_bound_per_hour, 4),
        "cost_ratio": round(results.cost_per_hour / results.lower_bound_per_hour, 4)
        if results.lower_bound_per_hour > 0
        else None,
        # the LP relaxation alone, before the tightening by hostname rules (bound.py)
        "lp_bound": round(results.lp_bound_per_hour, 4),
        "cost_ratio_lp": round(results.cost_per_hour / results.lp_bound_per_hour, 4)
        if results.lp_bound_per_hour > 0
        else None,
        "load_average": round(os.getloadavg()[0], 2),
        # ru_maxrss is in KiB on Linux: the peak of this whole process (catalog, pods and solve).
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object per run (JSON lines)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated pod counts")
    parser.add_argument("--catalogs", default=",".join(CATALOGS), help="fake and/or aws")
    parser.add_argument("--mixes", default=",".join(MIXES), help="diverse (upstream's fifths) and/or generic")
    parser.add_argument("--cold", action="store_true", help="do not import the LP solver before timing")
    parser.add_argument("--profile", default="", help="child runs write cProfile stats to PREFIX-<mix>-<catalog>-<n>")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child mode: a single run
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    catalogs = [c for c in args.catalogs.split(",") if c]
    mixes = [m for m in args.mixes.split(",") if m]
    if args.one:
        row = run_one(catalog=catalogs[0], pods=sizes[0], mix=mixes[0], warm=not args.cold, profile=args.profile)
        print(json.dumps(row))
        return 0
    for mix in mixes:
        for catalog in catalogs:
            for size in sizes:
                child = [sys.executable, __file__, "--one", "--catalogs", catalog, "--sizes", str(size)]
                if args.cold:
                    child.append("--cold")
                if args.profile:
                    child += ["--profile", f"{args.profile}-{mix}-{catalog}-{size}"]
                done = subprocess.run([*child, "--mixes", mix], capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(done.stderr, file=sys.stderr)
                    return done.returncode
                row = json.loads(done.stdout.strip().splitlines()[-1])
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    print(
                        f"{row['mix']:8} {row['catalog']:5} {row['pods']:>7} pods {row['instance_types']:>5} types "
                        f"{row['seconds']:>8.3f}s {row['pods_per_sec'] or 0:>10.0f} pods/s {row['nodes']:>6} nodes "
                        f"cost {row['cost']:>10.2f} bound {row['lower_bound']:>10.2f} "
                        f"ratio {row['cost_ratio'] or 0:.3f} (LP {row['cost_ratio_lp'] or 0:.3f}) "
                        f"cpu {row['cpu_seconds']:.3f}s rss {row['peak_rss_mb']:.0f}MB",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
