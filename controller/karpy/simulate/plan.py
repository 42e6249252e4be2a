"""Run the scheduler over a parsed cluster and render the plan (table for people, JSON as a stable contract).

JSON contract (documented in README; keys are never renamed, only added):

    {"nodeclaims": [{"name", "nodepool", "instance_type", "instance_type_options": [...], "zone",
                     "capacity_type", "price_per_hour", "requests": {...}, "pods": ["ns/name", ...],
                     "reason" (only on a static NodePool's claim, or one only a CapacityBuffer's room needs)}],
     "existing_nodes": [{"name", "pods": [...]}],
     "unschedulable": [{"pod": "ns/name", "reason": "...", "nodepools": [{"nodepool", "kind", "decisive", "message"}]}],
     "cost_per_hour": 0.0, "lower_bound_per_hour": 0.0,
     "capacity_buffers" (only when the input has some): [{"name", "replicas", "ready", "reason", "message" (when not
                     ready), "pods": ["ns/capacity-buffer-<name>-<i>", ...]}]}

A CapacityBuffer's virtual pods are planned like pending pods (the controller's provisioner schedules them so), and
listed under their claims and existing nodes by those names.

`instance_type` is the cheapest option and `zone`/`capacity_type` are those of its cheapest compatible offering.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy.api import ec2nodeclass, nodeoverlay, quantity
from karpy.cloudprovider import catalog, ec2shapes, overlay, types
from karpy.cloudprovider.fake import generator
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.scheduling import results, scheduler
from karpy.simulate import buffers, existing, manifests, reasons, static

_FAKE = re.compile(r"^fake:([1-9][0-9]{0,4})$")


CONFLICT_MESSAGE = nodeoverlay_controller.CONFLICT_MESSAGE

SOLVE_TIMEOUT = 60.0
"""Seconds the scheduling simulation may take (the controller's, and upstream's, Solve() deadline): pods it has not
placed by then are reported unschedulable with `scheduler.TIMED_OUT`, so any input finishes in bounded time."""


@dataclass(frozen=True, slots=True)
class Options:
    catalog: str = "aws"  # "aws" (the bundled real catalog) or "fake:N" (upstream's generated benchmark catalog)
    region: str = "us-east-1"
    zones: tuple[str, ...] | None = None  # None: every zone the catalog has for the region
    solve_timeout: float = SOLVE_TIMEOUT
    scheduling: karpy_settings.SchedulingSettings = dataclasses.field(default_factory=karpy_settings.SchedulingSettings)
    """The controller's PREFERENCE_POLICY, MIN_VALUES_POLICY and IGNORE_DRA_REQUESTS."""


def instance_types(cluster: manifests.Cluster, options: Options) -> dict[str, Sequence[types.InstanceType]]:
    """The instance types each NodePool can use, with its EC2NodeClass's kubelet settings and the input's
    NodeOverlays applied (as the controller applies them under the NodeOverlay gate)."""
    return overlaid(cluster, options)[0]


def overlaid(
    cluster: manifests.Cluster, options: Options
) -> tuple[dict[str, Sequence[types.InstanceType]], frozenset[str]]:
    """`instance_types`, and the NodeOverlays refused for a conflict with another of the same weight (whose
    ValidationSucceeded the controller sets False with reason Conflict)."""
    listed = _listed(cluster, options)
    if not cluster.nodeoverlays:
        return listed, frozenset()
    evaluation = overlay.evaluate(cluster.nodeoverlays, cluster.nodepools, listed)
    return {name: evaluation.store.apply(name, its) for name, its in listed.items()}, evaluation.conflicting


def overlay_statuses(cluster: manifests.Cluster, conflicting: frozenset[str]) -> list[dict[str, Any]]:
    """Each input NodeOverlay as the controller would mark it: applied, or refused with the Conflict reason."""
    return [
        {"name": o.name, "applied": True}
        if o.name not in conflicting
        else {"name": o.name, "applied": False, "reason": nodeoverlay.REASON_CONFLICT, "message": CONFLICT_MESSAGE}
        for o in sorted(cluster.nodeoverlays, key=lambda o: o.name)
    ]


def _listed(cluster: manifests.Cluster, options: Options) -> dict[str, Sequence[types.InstanceType]]:
    fake = _FAKE.match(options.catalog)
    if fake is None and options.catalog != "aws":
        raise manifests.InputError(f"--catalog: expected 'aws' or 'fake:N' (N in 1..99999), got {options.catalog!r}")
    out: dict[str, Sequence[types.InstanceType]] = {}
    for pool in cluster.nodepools:
        if fake is not None:
            out[pool.name] = generator.instance_types(int(fake.group(1)))
            continue
        nodeclass = cluster.nodeclasses.get(pool.template.node_class_ref.name)
        kubelet = None
        if nodeclass is not None and nodeclass.spec.kubelet is not None:
            kubelet = ec2shapes.KubeletOverrides.from_config(nodeclass.spec.kubelet)
        family = nodeclass.resolved_ami_family if nodeclass is not None else ec2nodeclass.AMIFamily.AL2023
        interfaces = nodeclass.spec.network_interfaces if nodeclass is not None else ()
        try:
            out[pool.name] = catalog.load(
                options.region, options.zones, kubelet=kubelet, ami_family=family, network_interfaces=interfaces
            )
        except (catalog.UnknownRegion, catalog.UnknownZone) as exc:
            raise manifests.InputError(f"--region/--zones: {exc}") from exc
    return out


def run(cluster: manifests.Cluster, options: Options, *, clock: karpy_clock.Clock | None = None) -> results.Results:
    """The plan for `cluster`; with a `clock`, the solve stops after `options.solve_timeout` seconds of it."""
    return run_with_overlays(cluster, options, clock=clock)[0]


def run_with_overlays(
    cluster: manifests.Cluster, options: Options, *, clock: karpy_clock.Clock | None = None
) -> tuple[results.Results, frozenset[str]]:
    """`run`, and the NodeOverlays refused for a conflict (`overlaid`)."""
    deadline = None
    if clock is not None:
        start = clock.now()
        deadline = lambda: clock.now() - start >= options.solve_timeout  # noqa: E731
    catalog_, conflicting = overlaid(cluster, options)
    launched = static.launches(cluster.nodepools, existing.state(cluster).state_nodes(), catalog_)
    inp = scheduling_input(cluster, options, catalog_)
    inp = dataclasses.replace(inp, existing_nodes=[*inp.existing_nodes, *static.in_flight(launched)])
    # Diagnosed: an unschedulable pod's reason is shown NodePool by NodePool, decisive constraint first.
    solved = scheduler.solve(dataclasses.replace(inp, deadline=deadline, diagnose=True))
    return static.merge(solved, launched), conflicting


def scheduling_input(
    cluster: manifests.Cluster, options: Options, catalog: Mapping[str, Sequence[types.InstanceType]]
) -> scheduler.SchedulingInput:
    """What the scheduler is asked: the manifests' pending pods (and those of nodes being deleted) against their
    NodePools with `catalog`'s instance types, the existing nodes and claims in flight, and the options' policies."""
    nodes_now, leaving = existing.existing(cluster)
    room = [p for r in rooms(cluster) for p in r.placeholders]
    return scheduler.SchedulingInput(
        pods=[*cluster.pending, *leaving, *room],
        nodepools=cluster.nodepools,
        instance_types=catalog,
        existing_nodes=nodes_now,
        bound_pods=cluster.bound,
        daemonsets=cluster.daemonsets,
        volumes=manifests.volume_catalog(cluster),
        options=options.scheduling,
    )


def rooms(cluster: manifests.Cluster) -> list[buffers.Room]:
    """The input's CapacityBuffers resolved and sized as the controller would (`simulate.buffers`)."""
    return buffers.rooms(cluster.capacitybuffers, pod_templates=cluster.pod_templates, workloads=cluster.workloads)


def _pod_key(pod: Any) -> str:
    return f"{pod.namespace}/{pod.name}"


def to_json(
    results: results.Results,
    *,
    overlays: Sequence[Mapping[str, Any]] = (),
    capacity_buffers: Sequence[buffers.Room] = (),
) -> dict[str, Any]:
    """The plan as JSON; `overlays` (`overlay_statuses`), when the input has NodeOverlays, under "nodeoverlays";
    `capacity_buffers` (`rooms`), when it has CapacityBuffers, under "capacity_buffers"."""
    room_keys = buffers.room_keys(capacity_buffers)
    claims: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    for claim in results.new_nodeclaims:
        counters[claim.nodepool] = counters.get(claim.nodepool, 0) + 1
        offering = claim.cheapest
        claims.append(
            {
                "name": f"{claim.nodepool}-{counters[claim.nodepool]}",
                "nodepool": claim.nodepool,
                "instance_type": offering.instance_type if offering else None,
                "instance_type_options": [it.name for it in claim.instance_type_options],
                "zone": offering.zone if offering else None,
                "capacity_type": offering.capacity_type if offering else None,
                "price_per_hour": round(offering.price, 6) if offering else None,
                "requests": {k: quantity.format_resource(k, v) for k, v in sorted(claim.requests.items())},
                "pods": sorted(_pod_key(p) for p in claim.pods),
                **({"reason": static.REASON} if claim.static else {}),
                **({"reason": why} if (why := buffers.claim_reason(claim, room_keys)) else {}),
            }
        )
    existing = [
        {"name": name, "pods": sorted(_pod_key(p) for p in pods)}
        for name, pods in sorted(results.existing_nodes.items())
        if pods
    ]
    unschedulable = [
        {"pod": key, "reason": reason, "nodepools": reasons.nodepools(results.diagnoses.get(key))}
        for key, reason in sorted(results.unschedulable.items())
    ]
    out: dict[str, Any] = {
        "nodeclaims": claims,
        "existing_nodes": existing,
        "unschedulable": unschedulable,
        "cost_per_hour": round(results.cost_per_hour, 6),
        "lower_bound_per_hour": round(results.lower_bound_per_hour, 6),
    }
    if overlays:
        out["nodeoverlays"] = [dict(o) for o in overlays]
    if capacity_buffers:
        out["capacity_buffers"] = buffers.to_json(capacity_buffers)
    return out


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def to_table(plan: dict[str, Any], *, max_options: int = 3, width: int = reasons.DEFAULT_WIDTH) -> str:
    """The JSON plan rendered for people; reasons wrapped at `width` columns."""
    lines: list[str] = []
    claims = plan["nodeclaims"]
    lines.append(f"NodeClaims to create: {len(claims)}")
    if claims:
        rows = []
        for c in claims:
            options = c["instance_type_options"]
            more = f" (+{len(options) - max_options})" if len(options) > max_options else ""
            rows.append(
                [
                    c["name"],
                    c["nodepool"],
                    c["instance_type"] or "-",
                    c["zone"] or "-",
                    c["capacity_type"] or "-",
                    f"${c['price_per_hour']:.4f}" if c["price_per_hour"] is not None else "-",
                    str(len(c["pods"])),
                    ", ".join(options[:max_options]) + more,
                ]
            )
        lines += _table(["NAME", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS", "OPTIONS"], rows)
    kept = [c["name"] for c in claims if c.get("reason") == static.REASON]
    if kept:
        lines.append(f"Of which for static NodePools: {', '.join(kept)} ({static.REASON})")
    room = [c["name"] for c in claims if c.get("reason") == buffers.REASON]
    if room:
        lines.append(f"Of which for CapacityBuffers: {', '.join(room)} ({buffers.REASON})")
    if plan.get("capacity_buffers"):
        lines.append("")
        lines.append("CapacityBuffers:")
        lines += _table(buffers.HEADERS, buffers.rows(plan["capacity_buffers"]))
    if plan["existing_nodes"]:
        lines.append("")
        lines.append("Pods nominated to existing nodes:")
        lines += _table(["NODE", "PODS"], [[n["name"], ", ".join(n["pods"])] for n in plan["existing_nodes"]])
    if plan["unschedulable"]:
        lines.append("")
        lines.append(f"Pods that cannot be scheduled: {len(plan['unschedulable'])}")
        for u in plan["unschedulable"]:
            lines += reasons.lines(u["pod"], u["reason"], u.get("nodepools", ()), width=width)
    refused = [o for o in plan.get("nodeoverlays", ()) if not o["applied"]]
    if refused:
        lines.append("")
        lines.append(f"NodeOverlays not applied: {len(refused)}")
        lines += [f"  {o['name']}: {o['reason']}, {o['message']}" for o in refused]
    lines.append("")
    lines.append(
        f"Cost: ${plan['cost_per_hour']:.4f}/h for new capacity "
        f"(fractional lower bound ${plan['lower_bound_per_hour']:.4f}/h)"
    )
    return "\n".join(lines)
