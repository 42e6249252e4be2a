"""One explanation of a cluster: `prepare` reads the cluster model once (on the thread that owns it: the running
controller's event loop, or the CLI's), `explain` decides (pure computation, in any thread). Both read only."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy.api import labels
from karpy.cloudprovider import types
from karpy.disruption import candidates, methods, passes
from karpy.explain import pending, repack, verdicts
from karpy.provisioning import snapshot
from karpy.scheduling import scheduler
from karpy.simulate import buffers, static
from karpy.state import cluster as state_cluster
from karpy.state import statenode, virtualpods


class NotFound(LookupError):
    """The node or pod asked about is not in the cluster."""


@dataclass(frozen=True, slots=True)
class Options:
    node: str = ""
    """Explain this node only (its verdict, simulated whatever the limit; no pending pods, no repack)."""
    pod: str = ""
    """Explain this pod only ("namespace/name"): its pending verdict, or its node's verdict."""
    simulations: int = verdicts.DEFAULT_SIMULATIONS
    """Survey simulations beyond the next pass's own (< 0: no limit)."""
    repack: bool = True
    spot_to_spot: bool = False
    """Feature gate SpotToSpotConsolidation, as the controller runs with it."""
    scheduling: karpy_settings.SchedulingSettings = field(default_factory=karpy_settings.SchedulingSettings)
    """PREFERENCE_POLICY and MIN_VALUES_POLICY, as the controller runs with them."""


@dataclass(frozen=True, slots=True)
class Prepared:
    now: float
    options: Options
    ctx: methods.Context
    price: Callable[[statenode.StateNode], float | None]
    focus: str
    """The node the verdicts are about ("" for all)."""
    nodes: bool
    """Whether node verdicts are asked for (not for a pending pod: the next pass is, always, as in a full run)."""
    batch: pending.Batch | None
    repack: repack.Prepared | None
    static: tuple[static.Launch, ...] = ()
    """The NodeClaims static pools' reconciler would create now, pending pods nominated to them as in flight."""
    buffers: tuple[buffers.Room, ...] = ()
    """The CapacityBuffers as sized; their virtual pods are the model's (`explain.buffers.load`)."""


@dataclass(frozen=True, slots=True)
class Explanation:
    now: float
    pending: tuple[pending.PendingPod, ...]
    verdicts: verdicts.Verdicts
    repack: repack.Repack | None
    warnings: tuple[str, ...] = ()
    static: tuple[static.Launch, ...] = ()
    buffers: tuple[buffers.Room, ...] = ()


def node_price(
    instance_types: Mapping[str, Sequence[types.InstanceType]],
) -> Callable[[statenode.StateNode], float | None]:
    """The $/h of a node's offering (instance type, zone, capacity type labels), as disruption prices candidates:
    from its pool's instance types, else from any pool's (an unmanaged node has none)."""
    anywhere = {t.name: t for found in instance_types.values() for t in found}

    def price(node: statenode.StateNode) -> float | None:
        name = node.labels.get(labels.LABEL_INSTANCE_TYPE, "")
        own = next((t for t in instance_types.get(node.nodepool, ()) if t.name == name), None)
        found = own or anywhere.get(name)
        offering = candidates.find_offering(found, node.labels) if found is not None else None
        return offering.price if offering is not None else None

    return price


def prepare(
    cluster: state_cluster.Cluster,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    *,
    clock: karpy_clock.Clock,
    options: Options = Options(),
    queued: frozenset[str] = frozenset(),
    rooms: Sequence[buffers.Room] = (),
) -> Prepared:
    """Everything `explain` needs, read from `cluster` now; raises NotFound for an unknown node or pod. `rooms`: the
    CapacityBuffers whose virtual pods `cluster` holds, to report."""
    focus, with_pending, with_nodes = options.node, not options.node, True
    view = cluster  # it builds its state nodes and pending pods once per change: read them freely
    if options.node and not any(n.name == options.node for n in view.state_nodes()):
        raise NotFound(f"node {options.node!r} not found")
    if options.pod:
        found = next((p for p in cluster.pods() if p.key == options.pod), None)
        if found is None:
            raise NotFound(f"pod {options.pod!r} not found")
        focus, with_nodes = found.node_name, bool(found.node_name)
    # Derived once for the pass's simulations and the pending pods' solve: per node, most of a solve's set-up.
    existing = tuple(scheduler.derive(n) for n in snapshot.existing_nodes(view.state_nodes()))
    ctx = passes.context(
        view,
        instance_types,
        clock=clock,
        queued=queued,
        options=passes.Options(spot_to_spot=options.spot_to_spot, scheduling=options.scheduling),
        existing=existing,
    )
    everything = not (options.node or options.pod)
    launched = tuple(static.launches(view.nodepools(), view.state_nodes(), instance_types))
    in_flight = (*existing, *(scheduler.derive(node) for node in static.in_flight(launched)))
    return Prepared(
        now=clock.now(),
        options=options,
        ctx=ctx,
        price=node_price(instance_types),
        focus=focus,
        nodes=with_nodes,
        batch=pending.prepare(view, instance_types, options=options.scheduling, existing=in_flight)
        if with_pending
        else None,
        repack=repack.prepare(view, instance_types, options=options.scheduling)
        if options.repack and everything
        else None,
        static=launched,
        buffers=tuple(rooms),
    )


def explain(prepared: Prepared, *, warnings: Sequence[str] = ()) -> Explanation:
    waiting = pending.explain(prepared.batch) if prepared.batch is not None else []
    ctx = prepared.ctx
    if any(virtualpods.is_virtual(p.pod) for p in waiting):
        # Emptiness leaves a node holding a buffer's room, as the provisioner's pass just placed it (core:
        # state/cluster.go UpdateBufferPodCounts); the solve above is that pass.
        held = collections.Counter(p.node for p in waiting if p.node and virtualpods.is_virtual(p.pod))
        ctx = dataclasses.replace(ctx, buffer_pods_on=lambda node: held[node])
    # The next pass is the cluster's, whatever the question: a focused run computes it as the full run does.
    found = verdicts.explain(
        ctx,
        price=prepared.price,
        focus=prepared.focus,
        simulations=prepared.options.simulations,
        nodes=prepared.nodes,
    )
    if prepared.options.pod:
        waiting = [p for p in waiting if p.pod.key == prepared.options.pod]
    return Explanation(
        now=prepared.now,
        pending=tuple(waiting),
        verdicts=found,
        repack=repack.explain(prepared.repack, price=prepared.price) if prepared.repack is not None else None,
        warnings=tuple(warnings),
        static=prepared.static,
        buffers=prepared.buffers,
    )
