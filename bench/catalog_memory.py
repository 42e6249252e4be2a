"""Bench (not a test): what the AWS provider's catalog build costs in memory, against the emulated account over HTTP.

The emulation runs in a child process (`remote.RemoteCluster`: moto and the API server, as in bench/performance.py),
so this process holds what a controller holds for its catalog: boto3 clients, the provider, the described shapes,
offerings and spot prices, and the built catalog. The provider is built as `controlplane.ControlPlane` builds it for
the emulation (isolated VPC: the bundled on-demand prices; shapes, offerings and spot prices from EC2), the demo node
class is resolved, then its catalog is built cold (as at start) and once the 5-minute cache has expired (the
re-describe a running controller does every 5 minutes): the process's RSS before and after each (`/proc/self/status`).
Then, on the same two paths (a further refresh, a cold build on a new provider), tracemalloc's peak during the build
and what is still held after it (MB, after a garbage collection): apart, as tracemalloc's tables would count in RSS.
With `--top N`, a further cold build, sampled after every EC2 response is parsed and at the end, names the N
allocation sites holding most at the largest of those points (the snapshots allocate too: not a reported figure).

    .venv/bin/python bench/catalog_memory.py --json --top 12
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import gc
import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import e2e
from karpy.api import ec2nodeclass, parse
from karpy.cloudprovider.aws import cache, clients, models, provider, sessions
from karpy_emulator import cluster, demo, remote

MB = 2**20


def _clients(region: str) -> clients.Clients:
    """Clients as `karpy run` builds them (karpy.cloudprovider.aws.factory): models cut to the called operations."""
    return clients.build_clients(region=region, session=sessions.session(region, operations=models.CALLED))


class _Clock:
    """The provider's clock: moved past the instance-type cache's TTL between builds, never slept on."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _provider(emulated: remote.RemoteCluster, aws: clients.Clients, clock: _Clock) -> provider.AWSCloudProvider:
    return provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=clock,
            settings=provider.Settings(
                cluster_name=emulated.cluster_name,
                region=emulated.region,
                cluster_endpoint=emulated.api_url,
                k8s_version=emulated.options.k8s_version,
                isolated_vpc=True,
            ),
            nodeclass_lookup=lambda _: None,
            sleep=asyncio.sleep,
            nodeclaims=tuple,
        )
    )


async def _rss(cloud: provider.AWSCloudProvider, nc: ec2nodeclass.EC2NodeClass, *, trim: bool) -> dict[str, Any]:
    """One catalog build without tracemalloc (its tables of traces would be part of the RSS): RSS before and after."""
    gc.collect()
    rss_before = e2e._rss_mb()
    built = await cloud.instance_type_provider.list(nc)
    gc.collect()
    out = {"types": len(built), "rss_before_mb": round(rss_before, 1), "rss_after_mb": round(e2e._rss_mb(), 1)}
    if trim:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        out["rss_after_malloc_trim_mb"] = round(e2e._rss_mb(), 1)
    return out


async def _traced(cloud: provider.AWSCloudProvider, nc: ec2nodeclass.EC2NodeClass) -> dict[str, Any]:
    """One catalog build under tracemalloc: peak and held MB."""
    gc.collect()
    tracemalloc.start()
    try:
        await cloud.instance_type_provider.list(nc)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"peak_mb": round(peak / MB, 1), "held_mb": round(held / MB, 1)}


async def _top_sites(
    cloud: provider.AWSCloudProvider, aws: clients.Clients, nc: ec2nodeclass.EC2NodeClass, *, top: int
) -> dict[str, Any]:
    """The `top` allocation sites (file:line, MB, blocks) at the largest point sampled during a cold build."""
    largest: list[tuple[int, str, tracemalloc.Snapshot]] = []

    def sample(point: str) -> Callable[..., None]:
        def take(**kwargs: Any) -> None:
            current, _ = tracemalloc.get_traced_memory()
            if not largest or current > largest[0][0]:
                what = f"{point} {kwargs.get('event_name', '')}".strip()
                largest[:] = [(current, what, tracemalloc.take_snapshot())]

        return take

    aws.ec2.meta.events.register("after-call.ec2", sample("after"))
    tracemalloc.start(1)
    try:
        await cloud.instance_type_provider.list(nc)
        sample("end")()
    finally:
        tracemalloc.stop()
    current, point, snapshot = largest[0]
    stats = snapshot.statistics("lineno")[:top]
    return {
        "at": point,
        "traced_mb": round(current / MB, 1),
        "sites": [[str(s.traceback[0]), round(s.size / MB, 2), s.count] for s in stats],
    }


async def measure(*, top: int, trim: bool) -> dict[str, Any]:
    options = cluster.ClusterOptions(cluster_name="karpy-bench", boot_delay=0.0)
    async with remote.RemoteCluster(options) as emulated:
        clock = _Clock()
        cloud = _provider(emulated, _clients(emulated.region), clock)
        manifest = demo.nodeclass_manifest(role=emulated.endpoints.node_role, discovery=emulated.cluster_name)
        nc = parse.ec2nodeclass(manifest)
        nc = dataclasses.replace(nc, status=await cloud.reconcile_nodeclass(nc))
        out: dict[str, Any] = {"cold": await _rss(cloud, nc, trim=trim)}
        clock.now += cache.INSTANCE_TYPES_TTL + 1
        out["refresh"] = await _rss(cloud, nc, trim=trim)
        clock.now += cache.INSTANCE_TYPES_TTL + 1
        out["refresh_traced"] = await _traced(cloud, nc)
        del cloud
        gc.collect()
        fresh = _provider(emulated, _clients(emulated.region), clock)
        out["cold_traced"] = await _traced(fresh, nc)
        if top:
            aws = _clients(emulated.region)
            out["top_sites_cold"] = await _top_sites(_provider(emulated, aws, clock), aws, nc, top=top)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--top", type=int, default=0, help="allocation sites to name at the build's largest point")
    parser.add_argument("--trim", action="store_true", help="also the RSS after glibc's malloc_trim(0) (Linux)")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    result = asyncio.run(measure(top=args.top, trim=args.trim))
    result["loadavg_before"] = [round(x, 2) for x in load]
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
