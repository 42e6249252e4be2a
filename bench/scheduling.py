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
    .venv/bin/python bench/scheduling.py --exact 3000 --sizes 20 --catalogs fake,aws  # plan, bound and optimum
    .venv/bin/python bench/scheduling.py --exact 3000 --sizes 20 --merge-to 4  # the same, classes merged as at scale
"""

from __future__ import annotations

import argparse
import cProfile
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

    `warm` imports the LP solver (highspy, imported lazily at the first LP) before the timer starts, so the row
    measures solving rather than a one-off module import. `profile` writes cProfile stats of the solve there."""
    from karpy import tasks
    from karpy.api import meta, nodepool
    from karpy.cloudprovider import catalog as cloudprovider_catalog
    from karpy.cloudprovider.fake import generator
    from karpy.scheduling import pods as scheduling_pods
    from karpy.scheduling import scheduler
    from karpy.scheduling.optimizer import lp

    pool = nodepool.NodePool(
        metadata=meta.ObjectMeta(name="default"),
        template=nodepool.NodeClaimTemplate(
            node_class_ref=meta.NodeClassRef(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
        ),
    )
    types = generator.instance_types(400) if catalog == "fake" else cloudprovider_catalog.load("us-east-1")
    # Parsed as generated (never all manifests alive at once) and through one interner, as a controller parsing a
    # watch stream would: pods stamped from one template share their labels, requests and constraints.
    pending = scheduling_pods.from_manifests(iter_pod_manifests(pods, mix=mix))
    inp = scheduler.SchedulingInput(pods=pending, nodepools=[pool], instance_types={pool.name: types})
    if warm:
        lp.warm()
    profiler = cProfile.Profile() if profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    with tasks.collector_paused():  # as the controller's solving thread runs it
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


def exact_row(*, catalog: str, pods: int, node_limit: int, merge_to: int = 0) -> dict[str, Any]:
    """The plan, its lower bound and the integer optimum of the same instance (scipy's milp, HiGHS), for a small
    diverse mix: how much of cost / bound is packing waste (plan / optimum) and how much bound weakness
    (optimum / bound). Conditioned, like the bound, on the plan's requirement groups (zone and the rest, hostname
    aside): a class is (group, requests, hostname groups it counts in), a node buys one type of the group's
    whole-node front at the group's price and holds at most each hostname group's cap. Past `node_limit`
    branch-and-bound nodes (a limit, not a time, so a run is repeatable), `optimum` is the best plan found and
    `optimum_at_least` the larger of the solver's proven bound and ours. `merge_to` > 0: the bound merges its classes
    down to that many (`bound.MERGED_CLASSES`), so a small solve takes the path of a large one."""
    import numpy as np
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    from karpy import tasks
    from karpy.api import labels, meta, nodepool
    from karpy.cloudprovider import catalog as cloudprovider_catalog
    from karpy.cloudprovider.fake import generator
    from karpy.scheduling import catalog as scheduling_catalog
    from karpy.scheduling import pods as scheduling_pods
    from karpy.scheduling import scheduler
    from karpy.scheduling.optimizer import bound, exclusion

    pool = nodepool.NodePool(
        metadata=meta.ObjectMeta(name="default"),
        template=nodepool.NodeClaimTemplate(
            node_class_ref=meta.NodeClassRef(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
        ),
    )
    types = generator.instance_types(400) if catalog == "fake" else cloudprovider_catalog.load("us-east-1")
    pending = scheduling_pods.from_manifests(iter_pod_manifests(pods, mix="diverse"))
    merged = bound.MERGED_CLASSES
    bound.MERGED_CLASSES = merge_to or merged
    try:
        with tasks.collector_paused():
            results = scheduler.solve(
                scheduler.SchedulingInput(pods=pending, nodepools=[pool], instance_types={pool.name: types})
            )
    finally:
        bound.MERGED_CLASSES = merged
    index = scheduling_catalog.ResourceIndex.build([p.requests for p in pending])
    offered = scheduling_catalog.PoolCatalog(pool, types, index=index)
    unit = np.array([1, 1024 * 1024 * 1000, 1000], dtype=np.int64)  # cpu in m, memory in Mi, pods: exact for these
    usable = offered.usable[:, :3] // unit
    exclusions = exclusion.Exclusions()
    groups: dict[Any, int] = {}
    counts: dict[tuple[int, tuple[int, ...], tuple[int, ...]], int] = {}
    for claim in results.new_nodeclaims:
        g = groups.setdefault(claim.requirements.without(labels.LABEL_HOSTNAME), len(groups))
        for p in claim.pods:
            key = (g, tuple((index.vector(p.requests)[:3] // unit).tolist()), exclusions.of(p))
            counts[key] = counts.get(key, 0) + 1
    col_group: list[int] = []
    col_type: list[int] = []
    col_price: list[float] = []
    for reqs, g in groups.items():
        ok, price = offered.offerings(reqs)
        allowed = np.flatnonzero(offered.mask(reqs) & ok & np.isfinite(price) & (usable >= 0).all(axis=1))
        front: list[int] = []
        for t in allowed[np.lexsort((allowed, price[allowed]))].tolist():  # cheapest first
            if not any((usable[k] >= usable[t]).all() for k in front):
                front.append(t)
        col_group += [g] * len(front)
        col_type += front
        col_price += [float(price[t]) for t in front]
    classes = list(counts)
    n = np.array([counts[c] for c in classes], dtype=np.float64)
    vec = np.array([c[1] for c in classes], dtype=np.float64)
    cap = usable[col_type].astype(np.float64)
    price = np.array(col_price)
    fits = np.array(
        [
            [g == c[0] and bool((usable[t] >= c[1]).all()) for g, t in zip(col_group, col_type, strict=True)]
            for c in classes
        ]
    )
    slots = min(pods, 2 * len(results.new_nodeclaims))  # node slots: more than an optimum needs on these mixes
    k, c_n = len(price), len(classes)
    eye = sparse.identity(slots, format="csr")
    zero_x, zero_y = sparse.csr_matrix((slots, c_n * slots)), sparse.csr_matrix((slots, slots * k))
    # variables: y[j, k] (node j buys column k) then x[c, j] (pods of class c on node j)
    rows = [
        (sparse.hstack([sparse.kron(eye, np.ones((1, k))), zero_x]), 0.0, 1.0),  # one column per node
        (
            sparse.hstack(
                [sparse.csr_matrix((c_n, slots * k)), sparse.kron(sparse.identity(c_n), np.ones((1, slots)))]
            ),
            n,
            n,
        ),
    ]
    for r in range(3):  # what a node's pods ask, within what its column offers
        rows.append(
            (sparse.hstack([-sparse.kron(eye, cap[:, r][None, :]), sparse.kron(vec[:, r][None, :], eye)]), -np.inf, 0)
        )
    # how many pods of a class a node of each column holds at most (0 where it does not fit): fewer than the big M
    # of a plain "only on a column it fits" row, which keeps the relaxation close and the search short
    each = np.floor(cap[None, :, :] / np.maximum(vec[:, None, :], 1e-9)).min(axis=2)
    for e, most in enumerate(exclusions.caps):
        each[[e in c[2] for c in classes]] = np.minimum(each[[e in c[2] for c in classes]], most)
    hold = np.where(fits, np.minimum(each, n[:, None]), 0)
    hosts = sparse.vstack([sparse.kron(eye, -hold[c][None, :]) for c in range(c_n)])
    rows.append((sparse.hstack([hosts, sparse.identity(c_n * slots)]), -np.inf, 0))
    for e, most in enumerate(exclusions.caps):  # at most `most` pods of a hostname group per node
        member = np.array([[e in c[2] for c in classes]], dtype=np.float64)
        rows.append((sparse.hstack([zero_y, sparse.kron(member, eye)]), -np.inf, most))
    order = sparse.eye(slots - 1, slots) - sparse.eye(slots - 1, slots, k=1)  # nodes by falling price: no symmetry
    rows.append(
        (sparse.hstack([sparse.kron(order, price[None, :]), sparse.csr_matrix((slots - 1, c_n * slots))]), 0, np.inf)
    )
    matrix = sparse.vstack([r[0] for r in rows]).tocsr()
    low = np.concatenate([np.broadcast_to(r[1], r[0].shape[0]) for r in rows])
    high = np.concatenate([np.broadcast_to(r[2], r[0].shape[0]) for r in rows])
    cost = np.concatenate([np.tile(price, slots), np.zeros(c_n * slots)])
    top = np.concatenate([np.ones(slots * k), np.repeat(n, slots)])
    cpu_start = time.process_time()
    found = milp(
        cost,
        constraints=LinearConstraint(matrix, low, high),
        integrality=np.ones(len(cost)),
        bounds=Bounds(0, top),
        options={"node_limit": node_limit, "mip_rel_gap": 1e-6},
    )
    best = float(found.fun) if found.x is not None else None
    proven = float(getattr(found, "mip_dual_bound", 0.0) or 0.0)
    return {
        "catalog": catalog,
        "pods": pods,
        "classes": c_n,
        "merged_classes": merge_to or None,
        "columns": k,
        "nodes": len(results.new_nodeclaims),
        "plan": round(results.cost_per_hour, 5),
        "bound": round(results.lower_bound_per_hour, 5),
        "optimum": round(best, 5) if best is not None else None,
        "optimal": found.status == 0,
        "optimum_at_least": round(max(proven, results.lower_bound_per_hour), 5),
        "plan_over_optimum": round(results.cost_per_hour / best, 4) if best else None,
        "optimum_over_bound": round(best / results.lower_bound_per_hour, 4) if best else None,
        "milp_cpu_seconds": round(time.process_time() - cpu_start, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object per run (JSON lines)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated pod counts")
    parser.add_argument("--catalogs", default=",".join(CATALOGS), help="fake and/or aws")
    parser.add_argument("--mixes", default=",".join(MIXES), help="diverse (upstream's fifths) and/or generic")
    parser.add_argument("--cold", action="store_true", help="do not import the LP solver before timing")
    parser.add_argument("--profile", default="", help="child runs write cProfile stats to PREFIX-<mix>-<catalog>-<n>")
    parser.add_argument(
        "--exact", type=int, default=0, metavar="NODES", help="compare with the integer optimum (small sizes)"
    )
    parser.add_argument(
        "--merge-to", type=int, default=0, metavar="N", help="with --exact: the bound merges its classes down to N"
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child mode: a single run
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    catalogs = [c for c in args.catalogs.split(",") if c]
    mixes = [m for m in args.mixes.split(",") if m]
    if args.exact:
        for catalog in catalogs:
            for size in sizes:
                row = exact_row(catalog=catalog, pods=size, node_limit=args.exact, merge_to=args.merge_to)
                print(json.dumps(row), flush=True)
        return 0
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
