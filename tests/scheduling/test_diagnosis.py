"""`SchedulingInput.diagnose`: for every pod the solve gives up on, which constraint rules out each existing node
and each NodePool (what `karpy explain` reports about pending pods)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels
from karpy.scheduling import pods, results, scheduler, volumes

ZONE_A, ZONE_B = scheduling_conftest.ZONES[0], scheduling_conftest.ZONES[1]
NO_SCHEDULE = labels.EFFECT_NO_SCHEDULE


IN_ZONE_A = {labels.LABEL_ZONE: ZONE_A}


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


TAINT = {"key": "dedicated", "effect": NO_SCHEDULE, "value": "gpu"}
ZONE_B_ONLY = {"nodeSelector": {labels.LABEL_ZONE: ZONE_B}}


@pytest.mark.parametrize(
    ("pod", "existing", "pool_spec", "nodes_by_kind", "pool_kind"),
    [
        # too big for every node and every instance type
        (
            builders.parsed_pod("huge", cpu="64", memory="1Gi"),
            [
                builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True),
                builders.parsed_existing_node("n2", labels=IN_ZONE_A, hostname=True),
            ],
            {},
            {"resources": 2},
            "resources",
        ),
        # a zone neither the nodes nor the pool's offerings have
        (
            builders.parsed_pod("z", **ZONE_B_ONLY, memory="1Gi"),
            [builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True)],
            {},
            {"requirements": 1},
            "requirements",
        ),
        # a taint the pod does not tolerate, on a node and on the pool
        (
            builders.parsed_pod("t", cpu="3", memory="1Gi"),
            [
                builders.parsed_existing_node("tainted", labels=IN_ZONE_A, hostname=True, taints=[TAINT]),
                builders.parsed_existing_node("small", labels=IN_ZONE_A, hostname=True, cpu="1"),
            ],
            {"taints": [TAINT]},
            {"taint": 1, "resources": 1},
            "taint",
        ),
        # the pool's limits are below its smallest instance type
        (
            builders.parsed_pod("l", cpu="6", memory="1Gi"),
            [builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True, cpu="2")],
            {"limits": {labels.RESOURCE_CPU: "1"}},
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
    found = diagnose(pod, existing, pools=[builders.parsed_nodepool(**pool_spec, requirements=[])])
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
    twin = bound_to("busy", builders.parsed_pod("twin", labels={"app": "solo"}, **apart, memory="1Gi"))
    pod = builders.parsed_pod("solo", labels={"app": "solo"}, **apart, **ZONE_B_ONLY, memory="1Gi")
    found = diagnose(
        pod, [builders.parsed_existing_node("busy", labels={labels.LABEL_ZONE: ZONE_B}, hostname=True, bound=[twin])]
    )
    assert [(r.kind, r.example) for r in found.nodes] == [("topology", "busy")]


def test_a_volume_in_another_zone_rules_the_pool_out_as_volume() -> None:
    pv = volumes.PersistentVolume("pv-b", (volumes.zone_term(ZONE_B),))
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv-b")
    pod = builders.parsed_pod(
        "db", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}], memory="1Gi"
    )
    found = diagnose(
        pod,
        [builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True)],
        volumes=volumes.VolumeCatalog.build([pvc], [pv]),
    )
    assert kinds(found) == ({"volume": 1}, {"default": "requirements"})


def test_a_pod_nothing_can_take_is_diagnosed_as_such() -> None:
    pod = builders.parsed_pod(
        "lost", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "missing"}}], memory="1Gi"
    )
    found = diagnose(pod, [builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True)])
    assert (found.kind, found.nodes, found.nodepools) == ("volume", (), ())


def test_nothing_is_diagnosed_unless_asked() -> None:
    pod = builders.parsed_pod("huge", cpu="64", memory="1Gi")
    res = scheduling_conftest.solve(
        [pod], existing_nodes=[builders.parsed_existing_node("n1", labels=IN_ZONE_A, hostname=True)]
    )
    scheduling_conftest.expect_not_scheduled(res, pod)
    assert res.diagnoses == {}
