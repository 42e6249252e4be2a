"""`SchedulingInput.diagnose`: for every pod the solve gives up on, which constraint rules out each existing node
and each NodePool (what `karpy explain` reports about pending pods)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, meta, quantity
from karpy.scheduling import pods, results, scheduler, volumes

ZONE_A, ZONE_B = scheduling_conftest.ZONES[0], scheduling_conftest.ZONES[1]
NO_SCHEDULE = labels.EFFECT_NO_SCHEDULE


def node(
    name: str,
    *,
    cpu: int = 4,
    zone: str = ZONE_A,
    taints: Sequence[meta.Taint] = (),
    bound: Sequence[pods.Pod] = (),
) -> scheduler.ExistingNode:
    return scheduler.ExistingNode(
        name=name,
        labels={labels.LABEL_ZONE: zone, labels.LABEL_HOSTNAME: name},
        taints=tuple(taints),
        allocatable={
            labels.RESOURCE_CPU: cpu * 1000,
            labels.RESOURCE_MEMORY: 16 * quantity.GI,
            labels.RESOURCE_PODS: 110_000,
        },
        pods=tuple(bound),
    )


def bound_to(name: str, pod: pods.Pod) -> pods.Pod:
    return dataclasses.replace(pod, node_name=name)


def diagnose(
    pod: pods.Pod,
    existing: Sequence[scheduler.ExistingNode],
    *,
    pools: Sequence[Any] | None = None,
    catalog_zones: Sequence[str] = (ZONE_A,),
    **kwargs: Any,
) -> results.Diagnosis:
    catalog = [
        scheduling_conftest.make_instance_type(f"t{n}", cpu=n, memory_gib=2 * n, zones=catalog_zones) for n in (2, 4, 8)
    ]
    res = scheduling_conftest.solve([pod], pools, catalog, existing_nodes=existing, diagnose=True, **kwargs)
    scheduling_conftest.expect_not_scheduled(res, pod)
    return res.diagnoses[pod.key]


def kinds(found: results.Diagnosis) -> tuple[dict[str, int], dict[str, str]]:
    return {r.kind: r.count for r in found.nodes}, {p.nodepool: p.kind for p in found.nodepools}


TAINT = meta.Taint("dedicated", NO_SCHEDULE, "gpu")
ZONE_B_ONLY = {"nodeSelector": {labels.LABEL_ZONE: ZONE_B}}


@pytest.mark.parametrize(
    ("pod", "existing", "pool_spec", "nodes_by_kind", "pool_kind"),
    [
        # too big for every node and every instance type
        (scheduling_conftest.make_pod("huge", cpu="64"), [node("n1"), node("n2")], {}, {"resources": 2}, "resources"),
        # a zone neither the nodes nor the pool's offerings have
        (scheduling_conftest.make_pod("z", spec=ZONE_B_ONLY), [node("n1")], {}, {"requirements": 1}, "requirements"),
        # a taint the pod does not tolerate, on a node and on the pool
        (
            scheduling_conftest.make_pod("t", cpu="3"),
            [node("tainted", taints=[TAINT]), node("small", cpu=1)],
            {"taints": [TAINT]},
            {"taint": 1, "resources": 1},
            "taint",
        ),
        # the pool's limits are below its smallest instance type
        (
            scheduling_conftest.make_pod("l", cpu="6"),
            [node("n1", cpu=2)],
            {"limits": {labels.RESOURCE_CPU: 1000}},
            {"resources": 1},
            "limits",
        ),
    ],
)
def test_each_place_says_which_constraint_rules_it_out(
    pod: pods.Pod,
    existing: list[scheduler.ExistingNode],
    pool_spec: Mapping[str, Any],
    nodes_by_kind: dict[str, int],
    pool_kind: str,
) -> None:
    found = diagnose(pod, existing, pools=[scheduling_conftest.make_nodepool(**pool_spec)])
    assert found.existing_nodes == len(existing)
    assert kinds(found) == (nodes_by_kind, {"default": pool_kind})
    (refusal,) = found.nodepools
    assert '"default"' in refusal.message  # the message names the pool, as the FailedScheduling event does


def test_hostname_anti_affinity_is_a_topology_refusal_with_the_blocking_node_named() -> None:
    apart = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": labels.LABEL_HOSTNAME}
                ]
            }
        }
    }
    twin = bound_to("busy", scheduling_conftest.make_pod("twin", labels_={"app": "solo"}, spec=apart))
    pod = scheduling_conftest.make_pod("solo", labels_={"app": "solo"}, spec={**apart, **ZONE_B_ONLY})
    found = diagnose(pod, [node("busy", zone=ZONE_B, bound=[twin])])
    assert [(r.kind, r.example) for r in found.nodes] == [("topology", "busy")]


def test_a_volume_in_another_zone_rules_the_pool_out_as_volume() -> None:
    pv = volumes.PersistentVolume("pv-b", (volumes.zone_term(ZONE_B),))
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv-b")
    pod = scheduling_conftest.make_pod(
        "db", spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}
    )
    found = diagnose(pod, [node("n1")], volumes=volumes.VolumeCatalog.build([pvc], [pv]))
    assert kinds(found) == ({"volume": 1}, {"default": "requirements"})


def test_a_pod_nothing_can_take_is_diagnosed_as_such() -> None:
    pod = scheduling_conftest.make_pod(
        "lost", spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "missing"}}]}
    )
    found = diagnose(pod, [node("n1")])
    assert (found.kind, found.nodes, found.nodepools) == ("volume", (), ())


def test_nothing_is_diagnosed_unless_asked() -> None:
    pod = scheduling_conftest.make_pod("huge", cpu="64")
    res = scheduling_conftest.solve([pod], existing_nodes=[node("n1")])
    scheduling_conftest.expect_not_scheduled(res, pod)
    assert res.diagnoses == {}
