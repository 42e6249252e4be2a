"""End-to-end benchmark of the controller on the emulated cluster (not a test).

Provisioning (wall clock, boot delay 0): 1000 pending pods in upstream's perf-suite mix (500 × 0.9 CPU / 3.1 Gi and
500 × 3.5 CPU / 28 Gi, two Deployments) against one NodePool. `nodeclaims_created_s` runs from the moment the batch
window closed (the provisioner's pass starts) until every NodeClaim of that pass was created; `pods_bound_s` from
the same moment until all 1000 pods are bound. `controller_rss_mb` is how much the process RSS grew from just
before the controller started to the end of provisioning (moto and the emulated API server share the process, so
the process total is reported apart as `process_rss_mb`).

Consolidation (1000 → 700 pods in virtual time) is NOT measured yet: `consolidation_virtual_s` and
`consolidation_node_ratio` are printed as null until the virtual-time phase is written.

    .venv/bin/python bench/e2e.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from karpy.kube import resources
from karpy.sim import cluster, controlplane, demo, remote, workloads

SMALL = ("small", "900m", "3174Mi")  # 0.9 CPU / 3.1 Gi
LARGE = ("large", "3500m", "28Gi")


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _deployment(name: str, cpu: str, memory: str, replicas: int) -> dict[str, Any]:
    body = demo.inflate_manifest(replicas)
    body["metadata"]["name"] = name
    body["spec"]["selector"] = {"matchLabels": {"app": name}}
    template = body["spec"]["template"]
    template["metadata"]["labels"] = {"app": name}
    template["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
    return body


def _pool() -> dict[str, Any]:
    body = demo.nodepool_manifest(consolidate_after="30s")
    body["spec"]["limits"] = {"cpu": "100000"}
    return body


async def _until(check: Callable[[], Awaitable[bool]], *, within: float, what: str, step: float = 0.2) -> float:
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > within:
            raise TimeoutError(f"{what}: not done after {within:.0f}s")
        await asyncio.sleep(step)
    return time.monotonic() - start


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


async def _warm_up(plane: controlplane.ControlPlane, *, within: float) -> float:
    """Wait until the controller has its catalog, as a running controller has (upstream's instance-type controller
    fetches types and offerings at start): seconds it took. Without the in-process shortcut the first listing is
    moto serialising ~1,400 shapes over HTTP, which is the emulator's cost, not the controller's."""

    async def catalog_cached() -> bool:
        provider = plane.provider
        pools = plane.cluster.nodepools()
        return provider is not None and bool(pools) and bool(await provider.instance_types(pools[0]))

    return await _until(catalog_cached, within=within, what="controller catalog", step=0.5)


async def provisioning(replicas: int, *, within: float) -> dict[str, Any]:
    options = cluster.ClusterOptions(cluster_name="karpy-bench", boot_delay=0.0, interval=0.5)
    async with remote.RemoteCluster(options) as emulated:
        api = emulated.client
        await api.create(
            resources.EC2NODECLASSES,
            demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name),
        )
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
        async with plane:
            warmup = await _warm_up(plane, within=within)
            reached: dict[str, float] = {}
            sampler = asyncio.create_task(_milestones(plane, reached))
            for name, cpu, memory in (SMALL, LARGE):
                await api.create(workloads.DEPLOYMENTS, _deployment(name, cpu, memory, replicas // 2))

            async def all_bound() -> bool:
                pods, _ = await api.list(resources.PODS, namespace="default")
                return len(pods) == replicas and all(p["spec"].get("nodeName") for p in pods)

            error = None
            try:
                await _until(all_bound, within=within, what="all pods bound", step=1.0)
            except TimeoutError as exc:
                error = str(exc)
            bound_at = time.monotonic()
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            rss_peak = _rss_mb("VmHWM")
            first = next((p for p in passes if p[2] > 0), None)
            claims, _ = await api.list(resources.NODECLAIMS)
            pods, _ = await api.list(resources.PODS, namespace="default")
            return {
                "pods": replicas,
                "catalog_warmup_s": round(warmup, 1),
                "pods_bound": sum(1 for p in pods if p["spec"].get("nodeName")),
                "nodeclaims": len(claims),
                "provisioning_passes": len(passes),
                "nodeclaims_created_s": round(first[1] - first[0], 2) if first else None,
                "nodeclaims_in_first_pass": first[2] if first else 0,
                "pods_bound_s": round(bound_at - first[0], 2) if first and error is None else None,
                **{
                    f"all_{name.lower()}_s": round(reached[name] - first[0], 2) if first and name in reached else None
                    for name in MILESTONES
                },
                "controller_rss_mb": round(rss_peak, 1),
                "consolidation_virtual_s": None,
                "consolidation_node_ratio": None,
                "error": error,
            }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--within", type=float, default=600.0, help="seconds before giving up on a phase")
    args = parser.parse_args(argv)
    result = asyncio.run(provisioning(args.pods, within=args.within))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
