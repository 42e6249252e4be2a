"""Builders and expectations for scheduling tests (shared as tests.scheduling.conftest)."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st
from tests import builders

from karpy import requirements
from karpy.api import labels, nodepool, quantity
from karpy.cloudprovider import types
from karpy.scheduling import pods, results, scheduler

ZONES = ("test-zone-1a", "test-zone-1b", "test-zone-1c")


def make_instance_type(
    name: str,
    *,
    cpu: float,
    memory_gib: float,
    pods_: int = 110,
    price: float | None = None,
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = (labels.CAPACITY_TYPE_ON_DEMAND,),
    extra_labels: Mapping[str, str] | None = None,
    extra_capacity: Mapping[str, int] | None = None,
) -> types.InstanceType:
    cost = price if price is not None else 0.1 * cpu + 0.1 * memory_gib
    offerings = tuple(
        types.Offering(zone=z, capacity_type=ct, price=cost * (0.7 if ct == labels.CAPACITY_TYPE_SPOT else 1.0))
        for z in zones
        for ct in capacity_types
    )
    capacity = {
        labels.RESOURCE_CPU: int(cpu * 1000),
        labels.RESOURCE_MEMORY: int(memory_gib * quantity.GI),
        labels.RESOURCE_PODS: pods_ * 1000,
        **(extra_capacity or {}),
    }
    lab = {labels.LABEL_INSTANCE_TYPE: name, labels.LABEL_ARCH: "amd64", labels.LABEL_OS: "linux"}
    lab.update(extra_labels or {})
    return types.InstanceType(name=name, labels=lab, capacity=capacity, offerings=offerings)


def fake_catalog(n: int) -> list[types.InstanceType]:
    """Upstream's fake.InstanceTypes(n): type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods; price 0.1·cpu + 0.1·GiB."""
    return [
        make_instance_type(f"fake-it-{i}", cpu=i + 1, memory_gib=2 * (i + 1), pods_=10 * (i + 1), price=0.3 * (i + 1))
        for i in range(n)
    ]


def make_pods(count: int, prefix: str = "p", **fields: Any) -> list[pods.Pod]:
    """`count` pods `prefix-0`, `prefix-1`, ... created in that order, each `builders.parsed_pod(**fields)` requesting
    1Gi of memory unless `fields` say otherwise."""
    fields.setdefault("memory", "1Gi")
    return [builders.parsed_pod(f"{prefix}-{i}", created=float(i), **fields) for i in range(count)]


def solve(
    pods_: Sequence[pods.Pod],
    pools: Sequence[nodepool.NodePool] | None = None,
    catalog: Sequence[types.InstanceType] | None = None,
    **kwargs: Any,
) -> results.Results:
    pools = pools or [builders.parsed_nodepool(requirements=[])]
    its = list(catalog) if catalog is not None else fake_catalog(20)
    return scheduler.solve(
        scheduler.SchedulingInput(pods=pods_, nodepools=pools, instance_types={p.name: its for p in pools}, **kwargs)
    )


def expect_scheduled(res: results.Results, *pods_: pods.Pod) -> None:
    placed = res.placements()
    missing = {p.key: res.unschedulable.get(p.key, "?") for p in pods_ if p.key not in placed}
    assert not missing, f"not scheduled: {missing}"


def expect_not_scheduled(res: results.Results, *pods_: pods.Pod) -> None:
    for p in pods_:
        assert p.key in res.unschedulable, f"{p.key} was scheduled"


def expect_provisioned(res: results.Results, count: int) -> list[results.PlannedNodeClaim]:
    assert len(res.new_nodeclaims) == count, [len(c.pods) for c in res.new_nodeclaims]
    return res.new_nodeclaims


def zone_of(claim: results.PlannedNodeClaim) -> str | None:
    req = claim.requirements.get(labels.LABEL_ZONE)
    vals = req.values() if req is not None else None
    if vals and len(vals) == 1:
        return next(iter(vals))
    return claim.cheapest.zone if claim.cheapest else None


def workload_spec(kind: str, app: str) -> dict[str, Any]:
    """A pod spec of one kind of workload, its rules selecting pods labelled app=`app`: generic (nothing),
    host-anti (required hostname anti-affinity), zone-spread / host-spread (maxSkew 1, DoNotSchedule),
    host-spread-2 (maxSkew 2), zone-pinned (a nodeSelector on the first zone) or host-port (port 80)."""
    sel = {"matchLabels": {"app": app}}
    if kind == "host-anti":
        term = {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": sel}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    if kind in ("zone-spread", "host-spread", "host-spread-2"):
        key = labels.LABEL_ZONE if kind == "zone-spread" else labels.LABEL_HOSTNAME
        skew = 2 if kind == "host-spread-2" else 1
        return {"topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": key, "labelSelector": sel}]}
    if kind == "zone-pinned":
        return {"nodeSelector": {labels.LABEL_ZONE: ZONES[0]}}
    if kind == "host-port":
        return {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}, "ports": [{"hostPort": 80}]}]}
    assert kind == "generic", kind
    return {}


def workload_groups(kinds: Sequence[str]) -> st.SearchStrategy[list[tuple[str, str, str, int]]]:
    """Up to six groups of pods, each (a `workload_spec` kind of `kinds`, cpu, memory, count)."""
    group = st.tuples(
        st.sampled_from(kinds),
        st.sampled_from(("100m", "500m", "1500m")),
        st.sampled_from(("256Mi", "2Gi", "6Gi")),
        st.integers(1, 12),
    )
    return st.lists(group, min_size=1, max_size=6)


def workload_pods(groups: Sequence[tuple[str, str, str, int]], *, shared_app: bool) -> list[pods.Pod]:
    """The pods of `workload_groups`' groups, labelled app=app<group> (or all app=shared), their rules selecting
    their own app."""
    out: list[pods.Pod] = []
    for g, (kind, cpu, mem, count) in enumerate(groups):
        app = "shared" if shared_app else f"app{g}"
        spec = workload_spec(kind, app)
        out += make_pods(count, prefix=f"g{g}", cpu=cpu, memory=mem, labels={"app": app}, **spec)
    return out


def expect_valid_plan(res: results.Results, ps: Sequence[pods.Pod], its: Sequence[types.InstanceType]) -> None:
    """Every pod exactly once; each claim's cheapest type is among its options, fits its pods and the daemon
    overhead it reports, and every pod is compatible with the claim's requirements and that type's labels."""
    placed = [p.key for cl in res.new_nodeclaims for p in cl.pods]
    placed += [p.key for ps_ in res.existing_nodes.values() for p in ps_]
    assert collections.Counter(placed) == collections.Counter(p.key for p in ps if p.key not in res.unschedulable)
    by_name = {t.name: t for t in its}
    for cl in res.new_nodeclaims:
        assert cl.cheapest is not None
        chosen = by_name[cl.cheapest.instance_type]
        assert chosen in cl.instance_type_options
        for name, amount in cl.requests.items():
            assert amount <= chosen.allocatable.get(name, 0), (cl.hostname, name)
        pod_sum: dict[str, int] = collections.Counter()
        for p in cl.pods:
            pod_sum.update(p.requests)
        for name, amount in pod_sum.items():
            assert amount <= cl.requests[name]
        node_labels = {**chosen.labels, labels.LABEL_ZONE: cl.cheapest.zone}
        node_labels[labels.LABEL_CAPACITY_TYPE] = cl.cheapest.capacity_type
        allow = requirements.ALLOW_UNDEFINED_WELL_KNOWN
        for p in cl.pods:
            assert cl.requirements.compatible(p.node_requirements(), allow_undefined=allow) is None
            assert p.node_requirements().admits({**node_labels, **cl.requirements.single_labels()})


def _selected(claim: results.PlannedNodeClaim, selector: requirements.Requirements | None) -> int:
    """Pods on `claim` that `selector` selects (all the tests' pods share one namespace)."""
    return sum(1 for q in claim.pods if selector is not None and selector.admits(q.labels))


def expect_hostname_rules_kept(res: results.Results, before: results.Results) -> None:
    """The post-passes break no hostname rule: an anti-affine pod has no pod its term selects beside it; a
    hostname-spread owner's claim holds no more pods its selector selects than maxSkew (or than first-fit left
    there: a pod it selects may join after it, as upstream allows); at most one pod takes a host port."""
    was = {
        (p.key, spread): _selected(cl, spread.selector)
        for cl in before.new_nodeclaims
        for p in cl.pods
        for spread in p.spread
    }
    for cl in res.new_nodeclaims:
        for p in cl.pods:
            for term in p.anti_affinity:
                if term.topology_key == labels.LABEL_HOSTNAME:
                    itself = term.selector is not None and term.selector.admits(p.labels)
                    assert _selected(cl, term.selector) == int(itself), (cl.hostname, p.key)
            for spread in p.spread:
                if spread.topology_key == labels.LABEL_HOSTNAME:
                    most = max(spread.max_skew, was[(p.key, spread)])
                    assert _selected(cl, spread.selector) <= most, (cl.hostname, p.key)
        assert sum(1 for p in cl.pods if p.host_ports) <= 1


def expect_domains_kept(res: results.Results, before: results.Results) -> None:
    """No pod changes zone: its claim's zone after the post-pass is the one it had, or a narrowing of an open one
    (then nothing that counts zones selects it: here, no zone-spread pod shares its app)."""
    zone_of = {p.key: cl.requirements.get(labels.LABEL_ZONE) for cl in before.new_nodeclaims for p in cl.pods}
    counted = {
        p.labels.get("app")
        for cl in before.new_nodeclaims
        for p in cl.pods
        if p.spread and any(s.topology_key == labels.LABEL_ZONE for s in p.spread)
    }
    for cl in res.new_nodeclaims:
        zone = cl.requirements.get(labels.LABEL_ZONE)
        for p in cl.pods:
            was = zone_of[p.key]
            if was == zone:
                continue
            assert was is None or was.values() is None, (p.key, was, zone)
            assert p.labels.get("app") not in counted, (p.key, was, zone)
