"""Bulk (run) placement must equal the pod-by-pod reference on random workloads.

The reference (`pod_by_pod=True`) places one pod per run and checks every slot in full (no pre-filter); the fast
path pre-filters slots, places bulk-safe runs several pods per slot, clones hostname-only claims, reuses a run's
fit for slots in the same state, walks spread runs over zone or capacity type from counts and per-slot room
(`spreading.Walk`), and places the other non-bulk-safe runs (self-affinity still choosing its zone) one pod at a
time over a pre-filter computed once. Equality is exact: the same claims in the same order, with the same pods,
options, offering, requirements and minValues relaxation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy import settings as karpy_settings
from karpy.api import labels, quantity
from karpy.scheduling import nodes, scheduler

KINDS = (
    "generic",
    "zone-spread",
    "zone-spread-2",
    "zone-spread-anyway",
    "zone-spread-other",
    "zone-spread-min-domains",
    "zone-spread-two-zones",
    "zone-spread-ignore-affinity",
    "capacity-spread",
    "host-spread",
    "host-spread-1",
    "zone-affinity",
    "zone-affinity-other",
    "host-anti",
    "zone-anti",
)


def _spread(
    key: str, sel: dict[str, Any], *, skew: int = 1, when: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": sel, **extra}
        ]
    }


def _two_zones() -> dict[str, Any]:
    """Node affinity to two of the three zones: the spread counts only those (Honor) or all three (Ignore)."""
    term = {
        "matchExpressions": [
            {"key": labels.LABEL_ZONE, "operator": "In", "values": list(scheduling_conftest.ZONES[:2])}
        ]
    }
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


def _term(kind: str, key: str, sel: dict[str, Any]) -> dict[str, Any]:
    term = {"topologyKey": key, "labelSelector": sel}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _spec(kind: str, app: str) -> dict[str, Any]:
    sel = {"matchLabels": {"app": app}}
    return {
        "generic": {},
        "zone-spread": _spread(labels.LABEL_ZONE, sel),
        "zone-spread-2": _spread(labels.LABEL_ZONE, sel, skew=2),
        "zone-spread-anyway": _spread(labels.LABEL_ZONE, sel, when="ScheduleAnyway"),
        # counts the first group's pods, not its own (unless it shares their label)
        "zone-spread-other": _spread(labels.LABEL_ZONE, {"matchLabels": {"app": "app0"}}),
        "zone-spread-min-domains": _spread(labels.LABEL_ZONE, sel, minDomains=4),
        "zone-spread-two-zones": {**_spread(labels.LABEL_ZONE, sel), **_two_zones()},
        "zone-spread-ignore-affinity": {**_spread(labels.LABEL_ZONE, sel, nodeAffinityPolicy="Ignore"), **_two_zones()},
        "capacity-spread": _spread(labels.LABEL_CAPACITY_TYPE, sel),
        "host-spread": _spread(labels.LABEL_HOSTNAME, sel, skew=2),
        "host-spread-1": _spread(labels.LABEL_HOSTNAME, sel),
        "zone-affinity": _term("podAffinity", labels.LABEL_ZONE, sel),
        # affinity to the first group's pods (not to itself): anchored once that group has landed
        "zone-affinity-other": _term("podAffinity", labels.LABEL_ZONE, {"matchLabels": {"app": "app0"}}),
        "host-anti": _term("podAntiAffinity", labels.LABEL_HOSTNAME, sel),
        "zone-anti": _term("podAntiAffinity", labels.LABEL_ZONE, sel),
    }[kind]


def _uneven_catalog() -> list[Any]:
    """Types whose offerings cover different zones, so a claim's zone choice changes which types remain."""
    zones = scheduling_conftest.ZONES
    return [
        scheduling_conftest.make_instance_type(
            f"uneven-{i}",
            cpu=2 * (i + 1),
            memory_gib=4 * (i + 1),
            pods_=8 * (i + 1),
            zones=zones[: 1 + i % 3] if i % 2 else zones[i % 3 :],
            # some types also sold as spot, so a capacity-type spread has two domains with different types
            capacity_types=(labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT)
            if i % 3
            else (labels.CAPACITY_TYPE_ON_DEMAND,),
        )
        for i in range(8)
    ]


workload = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(("250m", "1", "1500m", "3")),
        st.sampled_from(("256Mi", "2Gi", "6Gi")),
        st.integers(1, 10),
        st.booleans(),  # share the label of the previous group (one selector then spans two shapes)
    ),
    min_size=1,
    max_size=6,
)


def _shape(res: Any) -> tuple[Any, ...]:
    claims = tuple(
        (
            cl.nodepool,
            tuple(sorted(p.key for p in cl.pods)),
            cl.cheapest,
            tuple(t.name for t in cl.instance_type_options),
            cl.requirements,
            cl.min_values_relaxed,
        )
        for cl in res.new_nodeclaims
    )
    existing = tuple(sorted((k, tuple(sorted(p.key for p in v))) for k, v in res.existing_nodes.items()))
    return claims, existing, tuple(sorted(res.unschedulable.items()))


NODE_A = builders.parsed_existing_node(
    "node-a",
    labels={labels.LABEL_ZONE: scheduling_conftest.ZONES[1], labels.LABEL_NODEPOOL: "default"},
    memory="8Gi",
    pods="20",
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload,
    st.sampled_from((None, 24_000)),
    st.sampled_from((None, 6_000)),
    st.booleans(),
    st.booleans(),
    st.sampled_from((None, *karpy_settings.MinValuesPolicy)),
)
def test_bulk_equals_pod_by_pod(
    groups: list[tuple[str, str, str, int, bool]],
    cpu_limit: int | None,
    nodes_limit: int | None,
    uneven: bool,
    with_node: bool,
    min_values: str | None,
) -> None:
    all_pods = []
    app = "app0"
    for g, (kind, cpu, mem, count, share) in enumerate(groups):
        app = app if share and g else f"app{g}"
        all_pods += scheduling_conftest.make_pods(
            count, prefix=f"g{g}", cpu=cpu, memory=mem, labels={"app": app}, **_spec(kind, app)
        )
    limits = {}
    if cpu_limit:
        limits[labels.RESOURCE_CPU] = f"{cpu_limit}m"
    if nodes_limit:
        limits[labels.RESOURCE_NODES] = f"{nodes_limit}m"
    # minValues: a claim keeps at least 3 instance types, so it fills up before its largest type would
    flexible = [builders.requirement(labels.LABEL_INSTANCE_TYPE, "Exists", min_values=3)]
    pool = builders.parsed_nodepool(limits=limits, requirements=flexible if min_values else [])
    inp = scheduler.SchedulingInput(
        pods=all_pods,
        nodepools=[pool],
        instance_types={"default": _uneven_catalog() if uneven else scheduling_conftest.fake_catalog(12)},
        existing_nodes=[NODE_A] if with_node else (),
        compute_lower_bound=False,
        options=karpy_settings.SchedulingSettings(
            min_values_policy=min_values or karpy_settings.MinValuesPolicy.STRICT
        ),
    )
    bulk = scheduler.solve(inp)
    reference = scheduler.solve(inp, pod_by_pod=True)
    assert _shape(bulk) == _shape(reference)


def test_zonal_spread_on_pinned_nodes_needs_no_check_per_pod(monkeypatch: Any) -> None:
    # Three roomy nodes, one per zone: 90 zone-spread pods land 30/30/30 (maxSkew 1) as the reference places them,
    # while the walk checks each node about twice (its room, then the commit) instead of once per pod.
    existing = [
        scheduler.ExistingNode(
            f"node-{zone}",
            {labels.LABEL_ZONE: zone, labels.LABEL_NODEPOOL: "default"},
            (),
            {labels.RESOURCE_CPU: 64_000, labels.RESOURCE_MEMORY: 256 * quantity.GI, labels.RESOURCE_PODS: 200_000},
        )
        for zone in scheduling_conftest.ZONES
    ]
    spread = _spec("zone-spread", "web")
    inp = scheduler.SchedulingInput(
        pods=scheduling_conftest.make_pods(90, cpu="250m", memory="256Mi", labels={"app": "web"}, **spread),
        nodepools=[builders.parsed_nodepool(requirements=[])],
        instance_types={"default": scheduling_conftest.fake_catalog(4)},
        existing_nodes=existing,
        compute_lower_bound=False,
    )
    reference = scheduler.solve(inp, pod_by_pod=True)
    checks = 0
    evaluate = nodes.evaluate

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal checks
        checks += 1
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(nodes, "evaluate", counting)
    bulk = scheduler.solve(inp)
    assert _shape(bulk) == _shape(reference)
    assert sorted(len(v) for v in bulk.existing_nodes.values()) == [30, 30, 30]
    assert checks <= 2 * len(existing)
