"""Each pending pod's effective zone at the start of a solve (`scheduling.effective_zones`), beyond upstream's cases
(those are in upstream/cases/suite_effective_zones.yaml): volume alternatives, a self-affinity with no domain yet,
groups with no zone in common, pods refused outright, DRA pods, and the solve left as it was."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy import requirements, settings
from karpy.api import labels
from karpy.scheduling import effective_zones, scheduler, topology, volumes

ZONE = labels.LABEL_ZONE
Z1, Z2, Z3 = scheduling_conftest.ZONES
APP = {"app": "web"}


def _zones(*zones: str) -> requirements.Requirements:
    return requirements.Requirements([requirements.Requirement.in_(ZONE, zones)])


def _term(key: str = ZONE, selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": selector or APP}}


def _spread(max_skew: int = 1) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {
        "matchLabels": APP}}]  # fmt: skip


def _in_zone(name: str, zone: str, *bound: Any) -> scheduler.ExistingNode:
    return builders.parsed_existing_node(name, labels={ZONE: zone}, bound=bound, cpu="64", memory="256Gi")


def _bound(name: str, node: str) -> Any:
    return builders.parsed_pod(name, node=node, labels=APP, memory="1Gi")


def _by_pod(res: Any) -> dict[str, str]:
    return {p.key: zone for zone, pods_ in res.effective_zones.items() for p in pods_}


IGNORE_PREFERENCES = settings.SchedulingSettings(preference_policy=settings.PreferencePolicy.IGNORE)


def _zone_of(pod: Any, **kwargs: Any) -> str | None:
    return _by_pod(scheduling_conftest.solve([pod], **kwargs)).get(pod.key)


_PV_TWO_ZONES = volumes.PersistentVolume("pv", (_zones(Z1), _zones(Z2)))  # ORed terms: either zone
_BOUND_CLAIM = volumes.PersistentVolumeClaim("default", "data", "pv")
_WAIT = volumes.StorageClass("wait", volumes.BINDING_WAIT, (_zones(Z2, Z3),))
_UNBOUND_CLAIM = volumes.PersistentVolumeClaim("default", "more", storage_class_name="wait")


@pytest.mark.parametrize(
    ("fields", "catalog", "expected"),
    [
        # a PV whose terms allow either of two zones: the union of its alternatives
        ({"claims": ["data"]}, volumes.VolumeCatalog.build([_BOUND_CLAIM], [_PV_TWO_ZONES]), "flexible"),
        ({"claims": ["data"], "nodeSelector": {ZONE: Z2}},
         volumes.VolumeCatalog.build([_BOUND_CLAIM], [_PV_TWO_ZONES]), Z2),
        # two volumes: only their common zone is left
        ({"claims": ["data", "more"]},
         volumes.VolumeCatalog.build([_BOUND_CLAIM, _UNBOUND_CLAIM], [_PV_TWO_ZONES], [_WAIT]), Z2),
        # NotIn leaves the volume's zones to pick from
        ({"claims": ["more"], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": [Z3]}]}]}}}},
         volumes.VolumeCatalog.build([_UNBOUND_CLAIM], storage_classes=[_WAIT]), Z2),
        # a volume term that only excludes a zone pins none: the volume leaves the zone open
        ({"claims": ["data"]}, volumes.VolumeCatalog.build([_BOUND_CLAIM], [volumes.PersistentVolume("pv", (
            requirements.Requirements([requirements.Requirement.new(ZONE, "NotIn", values=[Z1])]),))]), "flexible"),
        # a class with no allowed topologies does not constrain
        ({"claims": ["open"]}, volumes.VolumeCatalog.build(
            [volumes.PersistentVolumeClaim("default", "open", storage_class_name="open")],
            storage_classes=[volumes.StorageClass("open", volumes.BINDING_WAIT)]), "flexible"),
        # only the first required node term counts (the others are relaxations)
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [Z1]}]},
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [Z2]}]}]}}}},
         volumes.VolumeCatalog(), Z1),
        # DoesNotExist on zone with nothing else constraining: upstream's "flexible"
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "DoesNotExist"}]}]}}}}, volumes.VolumeCatalog(),
         "flexible"),
    ],
    ids=["pv-either-zone", "pv-and-selector", "two-volumes", "not-in-and-class", "pv-not-in", "open-class",
         "first-term", "does-not-exist"],
)  # fmt: skip
def test_zone_requirement_and_volumes(fields: dict[str, Any], catalog: volumes.VolumeCatalog, expected: str) -> None:
    assert _zone_of(builders.parsed_pod("p", memory="1Gi", **fields), volumes=catalog) == expected


def test_a_self_affinity_with_no_domain_yet_may_start_in_any_zone() -> None:
    """Upstream picks one or two zones at random there; every zone the pod may use is the stable answer."""
    affine = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term()]}}
    assert _zone_of(builders.parsed_pod("p", labels=APP, memory="1Gi", affinity=affine)) == "flexible"
    pinned = builders.parsed_pod("q", labels=APP, memory="1Gi", affinity=affine, nodeSelector={ZONE: Z3})
    assert _zone_of(pinned) == Z3
    anchored = _in_zone("n1", Z2, _bound("there", "n1"))
    assert (
        _zone_of(builders.parsed_pod("r", labels=APP, memory="1Gi", affinity=affine), existing_nodes=[anchored]) == Z2
    )


def test_groups_that_admit_no_zone_in_common_leave_none() -> None:
    """The spread admits only the empty zone, the anti-affinity only the others: no zone is left."""
    existing = [_in_zone("n1", Z1, _bound("a", "n1")), _in_zone("n2", Z2, _bound("b", "n2"))]
    other = {"other": "x"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(selector=other)]}}
    marker = builders.parsed_pod("marker", node="n3", labels=other, memory="1Gi")
    existing.append(_in_zone("n3", Z3, marker))
    pod = builders.parsed_pod("p", labels=APP, memory="1Gi", topologySpreadConstraints=_spread(), affinity=anti)
    assert _zone_of(pod, existing_nodes=existing) == "none"
    assert _zone_of(dataclasses.replace(pod, anti_affinity=()), existing_nodes=existing) == Z3


def test_a_preferred_spread_counts_unless_preferences_are_ignored() -> None:
    existing = [_in_zone("n1", Z1, _bound("a", "n1")), _in_zone("n2", Z2, _bound("b", "n2"))]
    spread = [{**_spread()[0], "whenUnsatisfiable": "ScheduleAnyway"}]
    pod = builders.parsed_pod("p", labels=APP, memory="1Gi", topologySpreadConstraints=spread)
    assert _zone_of(pod, existing_nodes=existing) == Z3
    assert _zone_of(pod, existing_nodes=existing, options=IGNORE_PREFERENCES) == "flexible"


def test_pods_refused_outright_have_no_zone_and_dra_pods_have_one() -> None:
    missing_claim = builders.parsed_pod("claimless", memory="1Gi", claims=["gone"])
    unsupported = dataclasses.replace(builders.parsed_pod("odd", memory="1Gi"), unsupported="matchFields")
    dra = dataclasses.replace(builders.parsed_pod("gpu", memory="1Gi", nodeSelector={ZONE: Z1}), dra=True)
    res = scheduling_conftest.solve([missing_claim, unsupported, dra])
    assert _by_pod(res) == {dra.key: Z1}
    assert dra.key in res.unschedulable


def test_every_pod_of_a_run_gets_its_runs_zone_on_both_paths() -> None:
    pods_ = scheduling_conftest.make_pods(5, nodeSelector={ZONE: Z2}) + scheduling_conftest.make_pods(3, prefix="q")
    fast = scheduling_conftest.solve(pods_)
    reference = scheduler.solve(_input(pods_), pod_by_pod=True)
    assert _by_pod(fast) == _by_pod(reference)
    assert collections.Counter(_by_pod(fast).values()) == {Z2: 5, "flexible": 3}


def _input(pods_: list[Any]) -> scheduler.SchedulingInput:
    pool = builders.parsed_nodepool(requirements=[])
    return scheduler.SchedulingInput(
        pods=pods_, nodepools=[pool], instance_types={pool.name: scheduling_conftest.fake_catalog(20)}
    )


def test_asking_adds_no_group_to_the_solve() -> None:
    """The answer reads groups as counted so far; registering them early would change how the solve caches and
    clones claims."""
    existing = [_in_zone("n1", Z1, _bound("a", "n1"))]
    pod = builders.parsed_pod("p", labels=APP, memory="1Gi", topologySpreadConstraints=_spread())
    derived = scheduler.derived(existing[0])
    topo = topology.Topology(
        sources=[derived.source, topology.DomainSource(requirements.EMPTY, (), {ZONE: frozenset({Z1, Z2})})],
        bound=derived.bound,
        namespace_labels={},
    )
    zones = effective_zones.of_runs(
        topo, [[pod]], volume_catalog=volumes.VolumeCatalog(), policy="Respect", prefer_taints_exist=False
    )
    assert zones == {Z2: [pod]}
    assert topo.groups == {}


def test_a_group_counted_for_the_answer_is_taken_over_with_the_placements_since() -> None:
    """The solve registers the group the answer counted, counting only the pods placed since, not all again."""
    bound = _bound("a", "n1")
    derived = scheduler.derived(_in_zone("n1", Z1, bound))
    topo = topology.Topology(sources=[derived.source], bound=derived.bound, namespace_labels={})
    pod = builders.parsed_pod("p", labels=APP, memory="1Gi", topologySpreadConstraints=_spread())
    key = topology.spread_key(pod, pod.spread[0], pod.node_requirements())
    early = topo.counted(key)
    assert early.counts == {Z1: 1}
    topo.record(pod, _zones(Z2), ())
    assert topo.counted(key) is early
    assert topo.group(key) is early
    assert early.counts == {Z1: 1, Z2: 1}
    assert early.history == [(Z1, 1), (Z2, 1)]
