"""Bulk (run) placement must equal the pod-by-pod reference on random workloads."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduling import conftest as c

from karpy.api import labels
from karpy.scheduling import scheduler

KINDS = ("generic", "zone-spread", "host-spread", "zone-affinity", "host-anti")


def _spec(kind: str, app: str) -> dict[str, Any]:
    sel = {"matchLabels": {"app": app}}
    if kind == "zone-spread":
        return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": labels.LABEL_ZONE, "labelSelector": sel}]}
    if kind == "host-spread":
        return {
            "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": labels.LABEL_HOSTNAME, "labelSelector": sel}]
        }
    if kind == "zone-affinity":
        term = {"topologyKey": labels.LABEL_ZONE, "labelSelector": sel}
        return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    if kind == "host-anti":
        term = {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": sel}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return {}


workload = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(("250m", "1", "1500m")),
        st.sampled_from(("256Mi", "2Gi")),
        st.integers(1, 8),
    ),
    min_size=1,
    max_size=5,
)


def _shape(res: Any) -> tuple[Any, ...]:
    claims = tuple(
        (
            cl.nodepool,
            tuple(sorted(p.key for p in cl.pods)),
            cl.cheapest,
            tuple(t.name for t in cl.instance_type_options),
        )
        for cl in res.new_nodeclaims
    )
    existing = tuple(sorted((k, tuple(sorted(p.key for p in v))) for k, v in res.existing_nodes.items()))
    return claims, existing, tuple(sorted(res.unschedulable))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload, st.sampled_from((None, 24_000)))
def test_bulk_equals_pod_by_pod(groups: list[tuple[str, str, str, int]], cpu_limit: int | None) -> None:
    all_pods = []
    for g, (kind, cpu, mem, count) in enumerate(groups):
        app = f"app{g}"
        all_pods += c.make_pods(count, prefix=f"g{g}", cpu=cpu, memory=mem, labels_={"app": app}, spec=_spec(kind, app))
    pool = c.make_nodepool(limits={labels.RESOURCE_CPU: cpu_limit} if cpu_limit else None)
    inp = scheduler.SchedulingInput(
        pods=all_pods, nodepools=[pool], instance_types={"default": c.fake_catalog(12)}, compute_lower_bound=False
    )
    bulk = scheduler.solve(inp)
    reference = scheduler.solve(inp, pod_by_pod=True)
    assert _shape(bulk) == _shape(reference)
