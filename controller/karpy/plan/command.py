"""`karpy plan` from the command line: read the cluster (dump or kubeconfig) as `karpy explain` reads it, read the
proposal, price the proposed pools with the bundled catalog, plan, and hand back the JSON contract (`report`)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy import events, tasks
from karpy.api import ec2nodeclass
from karpy.cloudprovider import types
from karpy.explain import catalogs, sources
from karpy.explain import command as explain_command
from karpy.explain import run as explain_run
from karpy.kube import config, resources
from karpy.plan import proposal, report, run
from karpy.simulate import manifests, plan, reasons

Resolver = Callable[[Sequence[ec2nodeclass.EC2NodeClass]], Mapping[str, types.SelectorResolution]]
"""EC2NodeClasses -> their selectors as EC2 resolves them, by name."""


@dataclass(frozen=True, slots=True)
class Request:
    proposal: tuple[str, ...]
    """Files or directories of proposed NodePools, EC2NodeClasses and NodeOverlays."""
    delete: bool = False
    dump: tuple[str, ...] = ()
    """Dump files or directories; empty: the live cluster of the kubeconfig."""
    kubeconfig: str = ""
    context: str = ""
    catalog: plan.Options = field(default_factory=lambda: plan.Options(region=""))
    now: float | None = None
    node_overlay: bool = False
    options: run.Options = field(default_factory=run.Options)
    resolve: Resolver | None = None
    """Resolves EC2NodeClasses' selectors read-only through the AWS provider (built by the CLI when it is given
    AWS access); None: selectors that are not by id and change "may drift"."""


def plan_json(request: Request) -> dict[str, Any]:
    """The plan as the JSON contract. Raises manifests.InputError (NothingToPlan included) / config.ConfigError on
    bad input, explain_command.ReadError when the cluster cannot be read."""
    with tasks.collector_paused():  # as explain: the model is large, long-lived and acyclic
        return _plan(request)


def _plan(request: Request) -> dict[str, Any]:
    given = proposal.read(request.proposal, delete=request.delete)
    notes: list[str] = []
    now = request.now
    if request.dump:
        snap = sources.read_dump(request.dump)
        if snap.skipped:
            notes.append(manifests.skipped_summary(snap.skipped, reader="karpy plan"))
        if now is None and (now := sources.newest_timestamp(snap)) is not None:
            notes.append(f"evaluated as of {events.timestamp(now)}, the dump's newest timestamp (--now sets another)")
    else:
        cfg = config.load_kubeconfig(
            explain_command.kubeconfig_path(request.kubeconfig, os.environ), context=request.context
        )
        snap, skipped = asyncio.run(explain_command.read_live(cfg))
        notes.extend(skipped)
    clock: karpy_clock.Clock = karpy_clock.ManualClock(now) if now is not None else karpy_clock.SystemClock()
    cluster, warnings = sources.to_cluster(snap, clock=clock)
    proposed = run.propose(cluster, given)
    options = request.catalog
    if not options.region:
        options = plan.Options(options.catalog, catalogs.region_of(cluster.objects(resources.NODES)), options.zones)
    pools = list(proposed.pools.values())
    current = catalogs.instance_types(
        cluster.nodepools(),
        cluster.nodeclasses(),
        options,
        overlays=cluster.nodeoverlays() if request.node_overlay else (),
    )
    instance_types = catalogs.instance_types(
        pools, dict(proposed.classes), options, overlays=proposed.overlays if request.node_overlay else ()
    )
    # A node is priced by what it runs today (its pool's catalog now), falling back to the proposal's for a new pool.
    price = explain_run.node_price({**instance_types, **current})
    changed = run.changed_selectors(cluster, proposed)
    resolved = request.resolve(changed) if request.resolve is not None and changed else None
    found = run.plan(
        cluster,
        proposed,
        instance_types=instance_types,
        price=price,
        now=clock.now(),
        options=request.options,
        warnings=[*notes, *warnings],
        resolved=resolved,
    )
    return report.to_json(found)


def render(doc: dict[str, Any], *, output: str, width: int = reasons.DEFAULT_WIDTH) -> str:
    return json.dumps(doc, indent=2) if output == "json" else report.to_table(doc, width=width)
