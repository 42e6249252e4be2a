"""`karpy explain` from the command line: read the cluster (dump or kubeconfig), build the model, price it with
the bundled catalog, explain, and hand back the JSON contract (`report`). The CLI prints it or its table."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy import events, tasks
from karpy.explain import buffers, catalogs, report, run, sources
from karpy.kube import client, config, credentials, resources
from karpy.simulate import manifests, plan, reasons


class ReadError(Exception):
    """The cluster could not be read (API server unreachable, a request refused)."""


@dataclass(frozen=True, slots=True)
class Request:
    files: tuple[str, ...] = ()
    """Dump files or directories; empty: read the live cluster of the kubeconfig."""
    kubeconfig: str = ""
    """Path of the kubeconfig ("": $KUBECONFIG's first file, else ~/.kube/config)."""
    context: str = ""
    catalog: plan.Options = field(default_factory=lambda: plan.Options(region=""))
    """Instance-type catalog; region "" = the region the nodes are labelled with."""
    now: float | None = None
    """Evaluate as of this time (epoch seconds); None: a dump's newest timestamp, a live cluster's now."""
    options: run.Options = field(default_factory=run.Options)
    node_overlay: bool = False
    """Feature gate NodeOverlay, as the controller runs with it: apply the cluster's NodeOverlays."""
    strict: bool = False
    """Refuse a dump's objects of kinds explain does not read, instead of skipping them."""


def kubeconfig_path(explicit: str, environ: Mapping[str, str]) -> str:
    if explicit:
        return explicit
    from_env = environ.get("KUBECONFIG", "")
    return from_env.split(os.pathsep)[0] if from_env else os.path.expanduser("~/.kube/config")


async def read_live(cfg: credentials.Credentials) -> tuple[sources.Snapshot, list[str]]:
    from karpy.kube import rest  # here: its HTTP client takes a tenth of a second to import, and a dump needs none

    kube = rest.RestClient(cfg, clock=karpy_clock.SystemClock())
    try:
        return await sources.read_live(kube)
    except (client.KubeError, OSError, TimeoutError) as exc:
        raise ReadError(f"{cfg.server}: cannot list the cluster's objects: {exc}") from exc
    finally:
        await kube.close()


def explain(request: Request) -> dict[str, Any]:
    """The explanation as the JSON contract. Raises sources.InputError / config.ConfigError / run.NotFound on bad
    input, ReadError when the cluster cannot be read."""
    # One explanation builds the cluster model (hundreds of thousands of long-lived, acyclic objects) and then solves
    # over it again and again: every garbage collection on the way only rescans the model. Measured on a 5,000-node
    # dump: reading it took twice, and each simulation three times, as long with the collector on.
    with tasks.collector_paused():
        # The model is freed when `_explain` returns, still paused: resumed with millions of live objects the
        # collector's next pass would scan them all only to find them gone a moment later (1.3 s at 5,000 nodes).
        return _explain(request)


def _explain(request: Request) -> dict[str, Any]:
    skipped: list[str] = []
    now = request.now
    if request.files:
        snap = sources.read_dump(request.files, strict=request.strict)
        if snap.skipped:
            skipped.append(manifests.skipped_summary(snap.skipped, reader="karpy explain"))
        if snap.count == 0 and not snap.skipped:
            raise manifests.NothingToPlan(f"{', '.join(request.files)}: no objects to explain: the input is empty")
    else:
        cfg = config.load_kubeconfig(kubeconfig_path(request.kubeconfig, os.environ), context=request.context)
        snap, skipped = asyncio.run(read_live(cfg))
    if not snap.objects.get(resources.NODEPOOLS):
        where = ", ".join(request.files) if request.files else "the cluster"
        raise manifests.NothingToPlan(
            f"{where}: no NodePool: Karpenter launches, consolidates and disrupts nodes only for a NodePool, so "
            "there is nothing to explain (dump nodepools too: see `karpy explain --help`)"
        )
    if now is None and request.files:
        now = sources.newest_timestamp(snap)
        if now is not None:
            skipped.append(
                f"evaluated as of {events.timestamp(now)}, the dump's newest timestamp (--now sets another time)"
            )
    clock: karpy_clock.Clock = karpy_clock.ManualClock(now) if now is not None else karpy_clock.SystemClock()
    cluster, warnings = sources.to_cluster(snap, clock=clock)
    options = request.catalog
    if not options.region:
        options = plan.Options(options.catalog, catalogs.region_of(cluster.objects(resources.NODES)), options.zones)
    overlays = cluster.nodeoverlays() if request.node_overlay else ()
    instance_types = catalogs.instance_types(cluster.nodepools(), cluster.nodeclasses(), options, overlays=overlays)
    rooms = buffers.rooms(cluster, snap)
    buffers.load(cluster, rooms)  # as the buffer controller keeps them, for the provisioner and disruption to read
    prepared = run.prepare(cluster, instance_types, clock=clock, options=request.options, rooms=rooms)
    return report.to_json(run.explain(prepared, warnings=[*skipped, *warnings]))


def render(doc: dict[str, Any], *, output: str, width: int = reasons.DEFAULT_WIDTH) -> str:
    return json.dumps(doc, indent=2) if output == "json" else report.to_table(doc, width=width)
