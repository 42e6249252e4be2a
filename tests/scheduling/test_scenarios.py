"""Scenario tests mirroring upstream behaviours (one per done-when item)."""

from __future__ import annotations

import collections
import dataclasses
import gc
from typing import Any

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, meta, quantity
from karpy.cloudprovider.fake import generator
from karpy.scheduling import pods, scheduler, volumes
from karpy.scheduling.optimizer import repack

Op = meta.Operator


def test_generic_pods_pack_onto_one_cheapest_node_at_the_lower_bound() -> None:
    ps = scheduling_conftest.make_pods(10)
    res = scheduling_conftest.solve(ps)
    scheduling_conftest.expect_scheduled(res, *ps)
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert claim.cheapest is not None
    assert claim.cheapest.instance_type == "fake-it-9"  # 10 cpu for 10×1 cpu pods (+10 pods slots)
    assert res.cost_per_hour >= res.lower_bound_per_hour - 1e-9


def test_zonal_spread_is_3_3_3() -> None:
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": labels.LABEL_ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    ps = scheduling_conftest.make_pods(9, labels={"app": "web"}, **spread)
    res = scheduling_conftest.solve(ps)
    scheduling_conftest.expect_scheduled(res, *ps)
    per_zone: collections.Counter[str | None] = collections.Counter()
    for claim in res.new_nodeclaims:
        per_zone[scheduling_conftest.zone_of(claim)] += len(claim.pods)
    assert sorted(per_zone.values()) == [3, 3, 3]
    assert set(per_zone) == set(scheduling_conftest.ZONES)


def test_hostname_anti_affinity_puts_one_pod_per_node() -> None:
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}
                ]
            }
        }
    }
    ps = scheduling_conftest.make_pods(5, labels={"app": "db"}, **anti)
    res = scheduling_conftest.solve(ps)
    scheduling_conftest.expect_scheduled(res, *ps)
    claims = scheduling_conftest.expect_provisioned(res, 5)
    assert all(len(cl.pods) == 1 for cl in claims)


def test_zonal_self_affinity_keeps_a_deployment_in_one_zone() -> None:
    aff = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": labels.LABEL_ZONE, "labelSelector": {"matchLabels": {"app": "cache"}}}
                ]
            }
        }
    }
    ps = scheduling_conftest.make_pods(30, cpu="4", labels={"app": "cache"}, **aff)
    res = scheduling_conftest.solve(ps, catalog=scheduling_conftest.fake_catalog(8))
    scheduling_conftest.expect_scheduled(res, *ps)
    assert len(res.new_nodeclaims) > 1
    assert len({scheduling_conftest.zone_of(cl) for cl in res.new_nodeclaims}) == 1


def test_pvc_zone_is_honoured() -> None:
    pv = volumes.PersistentVolume("pv-1", (volumes.zone_term("test-zone-1b"),))
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv-1")
    pod = builders.parsed_pod(
        "p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}], memory="1Gi"
    )
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], [pv]))
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert scheduling_conftest.zone_of(claim) == "test-zone-1b"


def test_unbound_immediate_pvc_is_refused_with_reason() -> None:
    pvc = volumes.PersistentVolumeClaim("default", "data", storage_class_name="gp2")
    sc = volumes.StorageClass("gp2", volumes.BINDING_IMMEDIATE)
    pod = builders.parsed_pod(
        "p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}], memory="1Gi"
    )
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], storage_classes=[sc]))
    assert "Immediate" in res.unschedulable[pod.key]


def test_weighted_pool_is_preferred() -> None:
    light = builders.parsed_nodepool("light", weight=10, requirements=[])
    heavy = builders.parsed_nodepool("heavy", weight=50, requirements=[])
    ps = scheduling_conftest.make_pods(3)
    res = scheduling_conftest.solve(ps, pools=[light, heavy])
    assert {cl.nodepool for cl in res.new_nodeclaims} == {"heavy"}


def test_equal_weight_pools_go_by_name_descending() -> None:
    # pkg/utils/nodepool OrderByWeight: equal weights sort by name, descending, so "b" is tried before "a"
    ps = scheduling_conftest.make_pods(2)
    res = scheduling_conftest.solve(
        ps, pools=[builders.parsed_nodepool("a", requirements=[]), builders.parsed_nodepool("b", requirements=[])]
    )
    assert {cl.nodepool for cl in res.new_nodeclaims} == {"b"}
    res = scheduling_conftest.solve(
        ps,
        pools=[
            builders.parsed_nodepool("a", weight=2, requirements=[]),
            builders.parsed_nodepool("b", weight=1, requirements=[]),
        ],
    )
    assert {cl.nodepool for cl in res.new_nodeclaims} == {"a"}


def test_a_label_the_providers_types_define_is_well_known() -> None:
    # upstream providers register their instance-type labels as well-known (the fake's "size"), so a pod may select
    # on one that the pool leaves undefined; an unknown key still fails
    catalog = generator.default_instance_types()
    small = builders.parsed_pod("small", nodeSelector={generator.LABEL_SIZE: "large"}, memory="1Gi")
    res = scheduling_conftest.solve([small], catalog=catalog)
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert {t.labels[generator.LABEL_SIZE] for t in claim.instance_type_options} == {"large"}
    unknown = builders.parsed_pod("unknown", nodeSelector={"example.com/size": "large"}, memory="1Gi")
    scheduling_conftest.expect_not_scheduled(scheduling_conftest.solve([unknown], catalog=catalog), unknown)


def test_limits_are_respected_with_a_reason_for_the_rest() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_CPU: "4"}, requirements=[])
    ps = scheduling_conftest.make_pods(6, cpu="1")
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=scheduling_conftest.fake_catalog(4))
    placed = res.placements()
    assert 0 < len(placed) < 6
    total_cpu = sum(cl.instance_type_options[0].capacity[labels.RESOURCE_CPU] for cl in res.new_nodeclaims)
    assert total_cpu <= 4000 + 4000  # one claim may be charged with its largest option (upstream semantics)
    refused = [p for p in ps if p.key in res.unschedulable]
    assert refused
    assert all("limits" in res.unschedulable[p.key] for p in refused)


def test_nodes_limit() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_NODES: "2"}, requirements=[])
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": labels.LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "x"}}}
                ]
            }
        }
    }
    ps = scheduling_conftest.make_pods(3, labels={"app": "x"}, **anti)
    res = scheduling_conftest.solve(ps, pools=[pool])
    scheduling_conftest.expect_provisioned(res, 2)
    assert len(res.unschedulable) == 1
    assert "nodes limit" in next(iter(res.unschedulable.values()))


def test_untolerated_taints_are_refused() -> None:
    pool = builders.parsed_nodepool(
        taints=[{"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}], requirements=[]
    )
    plain = builders.parsed_pod("plain", memory="1Gi")
    tolerant = builders.parsed_pod(
        "tolerant", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}], memory="1Gi"
    )
    res = scheduling_conftest.solve([plain, tolerant], pools=[pool])
    assert "did not tolerate dedicated=gpu:NoSchedule" in res.unschedulable[plain.key]
    assert 'nodepool "default"' in res.unschedulable[plain.key]
    scheduling_conftest.expect_scheduled(res, tolerant)


def test_prefer_no_schedule_taint_is_relaxed_last() -> None:
    pool = builders.parsed_nodepool(taints=[{"key": "soft", "effect": "PreferNoSchedule"}], requirements=[])
    pod = builders.parsed_pod("p", memory="1Gi")
    res = scheduling_conftest.solve([pod], pools=[pool])
    scheduling_conftest.expect_scheduled(res, pod)


def test_daemonset_overhead_is_counted() -> None:
    daemon = builders.parsed_pod("ds", cpu="1", memory="1Gi")
    # Two 1-cpu pods fit a 2-cpu type alone, but with a 1-cpu daemon they need the 3-cpu type.
    res = scheduling_conftest.solve(
        scheduling_conftest.make_pods(2), catalog=scheduling_conftest.fake_catalog(6), daemonsets=[daemon]
    )
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert claim.cheapest is not None
    assert claim.cheapest.instance_type == "fake-it-2"
    assert claim.requests[labels.RESOURCE_CPU] == 3000


def test_min_values_honoured() -> None:
    pool = builders.parsed_nodepool(
        requirements=[builders.requirement(labels.LABEL_INSTANCE_TYPE, "Exists", min_values=3)]
    )
    ps = scheduling_conftest.make_pods(5, cpu="1")
    res = scheduling_conftest.solve(ps, pools=[pool], catalog=scheduling_conftest.fake_catalog(8))
    scheduling_conftest.expect_scheduled(res, *ps)
    for claim in res.new_nodeclaims:
        assert len(claim.instance_type_options) >= 3


def test_min_values_strict_refuses_when_catalog_too_small() -> None:
    pool = builders.parsed_nodepool(
        requirements=[builders.requirement(labels.LABEL_INSTANCE_TYPE, "Exists", min_values=3)]
    )
    pod = builders.parsed_pod("p", cpu="1", memory="1Gi")
    res = scheduling_conftest.solve([pod], pools=[pool], catalog=scheduling_conftest.fake_catalog(2))
    assert "minValues" in res.unschedulable[pod.key]


def test_existing_node_is_used_before_new_claims() -> None:
    from karpy.scheduling import scheduler

    node = scheduler.ExistingNode(
        "node-a",
        {labels.LABEL_ZONE: "test-zone-1a", labels.LABEL_NODEPOOL: "default"},
        (),
        {labels.RESOURCE_CPU: 4000, labels.RESOURCE_MEMORY: 8 * quantity.GI, labels.RESOURCE_PODS: 110_000},
    )
    ps = scheduling_conftest.make_pods(2)
    res = scheduling_conftest.solve(ps, existing_nodes=[node])
    assert set(res.existing_nodes) == {"node-a"}
    scheduling_conftest.expect_provisioned(res, 0)


@pytest.mark.parametrize("pod_by_pod", [False, True])
@pytest.mark.parametrize("settling", [False, True])
def test_a_node_inside_consolidate_after_refuses_only_pods_moved_off_candidates(
    settling: bool, pod_by_pod: bool
) -> None:
    node = scheduler.ExistingNode(
        "node-a",
        {labels.LABEL_ZONE: "test-zone-1a", labels.LABEL_NODEPOOL: "default"},
        (),
        {labels.RESOURCE_CPU: 4000, labels.RESOURCE_MEMORY: 8 * quantity.GI, labels.RESOURCE_PODS: 110_000},
        under_consolidate_after=settling,
    )
    pending = scheduling_conftest.make_pods(2, prefix="pending")
    moved = [dataclasses.replace(p, from_candidate=True) for p in scheduling_conftest.make_pods(2, prefix="moved")]
    pool = builders.parsed_nodepool(requirements=[])
    inp = scheduler.SchedulingInput(
        pods=[*moved, *pending],
        nodepools=[pool],
        instance_types={pool.name: scheduling_conftest.fake_catalog(20)},
        existing_nodes=[node],
    )
    placed = scheduler.solve(inp, pod_by_pod=pod_by_pod).placements()
    assert {placed[p.key] for p in pending} == {"node/node-a"}  # pending pods need a home either way
    assert {placed[p.key].startswith("claim/") for p in moved} == {settling}


def test_node_selector_on_unknown_custom_label_names_the_label() -> None:
    pod = builders.parsed_pod("p", nodeSelector={"team": "a"}, memory="1Gi")
    res = scheduling_conftest.solve([pod])
    assert 'label "team" does not have known values' in res.unschedulable[pod.key]


def test_preferred_node_affinity_is_relaxed_when_impossible() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [{"key": labels.LABEL_ZONE, "operator": "In", "values": ["nowhere"]}]
                        },
                    }
                ]
            }
        }
    }
    pod = builders.parsed_pod("p", **spec, memory="1Gi")
    res = scheduling_conftest.solve([pod])
    scheduling_conftest.expect_scheduled(res, pod)


def test_bad_manifest_names_the_field() -> None:
    import pytest

    from karpy.api import errors

    with pytest.raises(errors.ValidationError, match=r"spec.containers\[0\].resources.requests.cpu"):
        pods.from_manifest(
            {"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}
        )


def test_a_deadline_stops_the_solve_between_runs_and_keeps_what_it_placed() -> None:
    big = scheduling_conftest.make_pods(
        3, prefix="big", cpu="4"
    )  # one run (same shape), placed first: larger requests go first
    small = scheduling_conftest.make_pods(5, prefix="small", cpu="1")  # a second run
    checks = 0

    def after_the_first_run() -> bool:
        nonlocal checks
        checks += 1
        return checks > 1

    res = scheduling_conftest.solve([*small, *big], deadline=after_the_first_run)
    assert res.timed_out
    scheduling_conftest.expect_scheduled(res, *big)
    assert {p.key: res.unschedulable.get(p.key) for p in small} == {p.key: scheduler.TIMED_OUT for p in small}
    assert res.lower_bound_per_hour == 0.0  # no time for the bound either


def test_no_deadline_means_no_time_out() -> None:
    ps = scheduling_conftest.make_pods(4)
    res = scheduling_conftest.solve(ps, deadline=lambda: False)
    assert not res.timed_out
    scheduling_conftest.expect_scheduled(res, *ps)


def _term(key: str, app: str) -> dict[str, object]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def test_self_affinity_on_hostname_uses_the_first_node_only() -> None:
    # topology_test.go "should respect self pod affinity for first empty topology domain only (hostname)": the
    # fake types hold 5 pods, so 5 pods land on one node and the other 5 stay pending (no second node)
    affinity = {
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(labels.LABEL_HOSTNAME, "s2")]}
        }
    }
    ps = scheduling_conftest.make_pods(10, cpu="0", memory="0", labels={"app": "s2"}, **affinity)
    res = scheduling_conftest.solve(ps, catalog=generator.default_instance_types())
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert len(claim.pods) == 5
    assert len(res.unschedulable) == 5


def test_zone_anti_affinity_to_a_pod_whose_zone_is_undecided() -> None:
    # topology_test.go "should not violate pod anti-affinity on zone (other schedules first)": the selected pod goes
    # first onto a claim open to every zone, so it may end up in any of them and the anti-affine pod must wait
    first = builders.parsed_pod("first", cpu="2", labels={"app": "s2"}, memory="1Gi")
    anti = {
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(labels.LABEL_ZONE, "s2")]}
        }
    }
    avoider = builders.parsed_pod("avoider", cpu="0", memory="0", **anti)
    res = scheduling_conftest.solve([first, avoider])
    scheduling_conftest.expect_scheduled(res, first)
    scheduling_conftest.expect_not_scheduled(res, avoider)


def test_the_solve_leaves_the_collector_to_its_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    # The collector is process-wide: the pure layer never switches it; the thread that solves does (karpy.tasks).
    during: list[bool] = []
    real = repack.repack

    def spy(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(repack, "repack", spy)
    assert not scheduling_conftest.solve(scheduling_conftest.make_pods(3)).unschedulable
    assert during == [True]


@pytest.mark.parametrize("pod_by_pod", [False, True])
def test_terminating_pods_count_in_no_spread(pod_by_pod: bool) -> None:
    # Two terminating pods of the app on a full node in the first zone (topology.go IgnoredForTopology): the three
    # pending ones spread as if that zone were empty, one per zone; counted, none could go to the first zone.
    spread = {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": labels.LABEL_ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}
        ]
    }
    leaving = [
        dataclasses.replace(p, node_name="node-a", terminating=True)
        for p in scheduling_conftest.make_pods(2, prefix="old", labels={"app": "web"})
    ]
    node = scheduler.ExistingNode(
        "node-a",
        {labels.LABEL_ZONE: scheduling_conftest.ZONES[0]},
        (),
        {labels.RESOURCE_CPU: 100, labels.RESOURCE_PODS: 110_000},
        pods=tuple(leaving),
    )
    pending = scheduling_conftest.make_pods(3, cpu="1", labels={"app": "web"}, **spread)
    pool = builders.parsed_nodepool(requirements=[])
    res = scheduler.solve(
        scheduler.SchedulingInput(
            pods=pending,
            nodepools=[pool],
            instance_types={pool.name: scheduling_conftest.fake_catalog(8)},
            existing_nodes=[node],
        ),
        pod_by_pod=pod_by_pod,
    )
    assert not res.unschedulable
    assert sorted(scheduling_conftest.zone_of(cl) or "" for cl in res.new_nodeclaims) == sorted(
        scheduling_conftest.ZONES
    )
