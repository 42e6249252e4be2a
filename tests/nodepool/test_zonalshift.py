"""ZonalShiftActive / ZonalShiftCleared on NodePools: upstream's controller suite (aws:
pkg/controllers/arczonalshift/suite_test.go) as data, on the state cache and an in-memory recorder. The shifts come
from a scripted source here; tests/cloudprovider/aws/test_zonalshift.py runs the same loop on the real
GetManagedResource reader."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests import builders

from karpy import clock, events
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodepool import zonalshift
from karpy.state import cluster

SUBNETS = [
    {"id": "subnet-test1", "zone": "test-zone-1a", "zoneID": "tstz1-1a"},
    {"id": "subnet-test2", "zone": "test-zone-1b", "zoneID": "tstz1-1b"},
    {"id": "subnet-test3", "zone": "test-zone-1c", "zoneID": "tstz1-1c"},
]
ACTIVE_1A = (
    "Warning",
    "ZonalShiftActive",
    "Zonal shift detected: offerings in zone test-zone-1a (tstz1-1a) are unavailable for this NodePool",
)
CLEARED_1A = (
    "Normal",
    "ZonalShiftCleared",
    "Zonal shift cleared: offerings in zone test-zone-1a (tstz1-1a) are restored for this NodePool",
)


def _zones(key: str, *values: str) -> list[dict[str, Any]]:
    return [builders.requirement(key, "In", *values)]


@dataclass(frozen=True)
class Case:
    it: str
    steps: Sequence[tuple[frozenset[str], Mapping[str, Sequence[tuple[str, str, str]]]]]
    """Per reconcile: the zone ids shifted, and the events (type, reason, message) expected on each pool."""
    pools: Mapping[str, list[dict[str, Any]] | None] = field(default_factory=lambda: {"default": None})
    """NodePool name → its requirements (None: no zone restriction)."""


CASES = [
    Case("should emit a Warning event on an affected NodePool when a zone shifts",
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]})]),
    Case("should emit a Normal event on an affected NodePool when a zone shift clears",
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]}), (frozenset(), {"default": [CLEARED_1A]})]),
    Case("should not emit an event on a NodePool restricted to different zones",
         pools={"default": _zones("topology.kubernetes.io/zone", "test-zone-1b", "test-zone-1c")},
         steps=[(frozenset({"tstz1-1a"}), {})]),
    Case("should emit an event on a NodePool with no zone restriction",
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]})]),
    Case("should not emit an event for a shift in a zone the NodeClass does not resolve to",
         steps=[(frozenset({"tstz1-1z"}), {})]),
    Case("should not emit events when there is no state change between reconciles",
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]}), (frozenset({"tstz1-1a"}), {})]),
    Case("should only emit on NodePools affected by the shifted zone",
         pools={"default": None, "restricted": _zones("topology.kubernetes.io/zone", "test-zone-1b")},
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]})]),
    # karpy's own, from the same rule: the zone-id requirement counts as the zone-name one does.
    Case("should not emit an event on a NodePool whose zone-id requirement excludes the zone",
         pools={"default": _zones("topology.k8s.aws/zone-id", "tstz1-1b")},
         steps=[(frozenset({"tstz1-1a"}), {})]),
    Case("should emit an event on a NodePool whose requirements allow the zone by name and id",
         pools={"default": [*_zones("topology.kubernetes.io/zone", "test-zone-1a"),
                            *_zones("topology.k8s.aws/zone-id", "tstz1-1a")]},
         steps=[(frozenset({"tstz1-1a"}), {"default": [ACTIVE_1A]})]),
    Case("should emit one event per shifted zone and clear only the zone that recovered",
         steps=[(frozenset({"tstz1-1a", "tstz1-1b"}), {"default": [
                    ACTIVE_1A,
                    ("Warning", "ZonalShiftActive", "Zonal shift detected: offerings in zone test-zone-1b (tstz1-1b) "
                                                    "are unavailable for this NodePool")]}),
                (frozenset({"tstz1-1b"}), {"default": [CLEARED_1A]})]),
]  # fmt: skip


class ScriptedShifts:
    """The shift source the loop reads: what `update` finds next, or the error it raises."""

    def __init__(self) -> None:
        self.next: frozenset[str] | Exception = frozenset()
        self._current: frozenset[str] = frozenset()

    async def update(self) -> None:
        if isinstance(self.next, Exception):
            raise self.next
        self._current = self.next

    def shifted_zones(self) -> frozenset[str]:
        return self._current


def _state(pools: Mapping[str, list[dict[str, Any]] | None], now: clock.ManualClock) -> cluster.Cluster:
    state = cluster.Cluster(clock=now)
    nodeclass = builders.ec2nodeclass("default", uid="uid-nc", status={"subnets": SUBNETS})
    state.apply(resources.EC2NODECLASSES, kube_client.WatchEvent(kube_client.ADDED, nodeclass))
    for name, reqs in pools.items():
        pool = builders.nodepool(name, uid=f"uid-{name}", requirements=reqs)
        state.apply(resources.NODEPOOLS, kube_client.WatchEvent(kube_client.ADDED, pool))
    return state


@pytest.mark.parametrize("case", CASES, ids=[c.it for c in CASES])
async def test_upstream_suite(case: Case) -> None:
    now = clock.ManualClock()
    source, recorder = ScriptedShifts(), events.MemoryRecorder()
    controller = zonalshift.ZonalShiftController(source, _state(case.pools, now), recorder=recorder, clock=now)
    for shifted, expected in case.steps:
        recorder.clear()
        source.next = shifted
        await controller.reconcile()
        got: dict[str, list[tuple[str, str, str]]] = {}
        for e in recorder.events:
            assert (e.kind, e.uid) == ("NodePool", f"uid-{e.name}")
            got.setdefault(e.name, []).append((e.type, e.reason, e.message))
        assert got == {name: list(evs) for name, evs in expected.items()}


async def test_a_failed_read_keeps_the_transition_for_the_next_pass() -> None:
    now = clock.ManualClock()
    source, recorder = ScriptedShifts(), events.MemoryRecorder()
    controller = zonalshift.ZonalShiftController(source, _state({"default": None}, now), recorder=recorder, clock=now)
    source.next = frozenset({"tstz1-1a"})
    await controller.reconcile()
    source.next = RuntimeError("throttled")
    with pytest.raises(RuntimeError):
        await controller.reconcile()
    source.next = frozenset()
    await controller.reconcile()
    assert [(e.type, e.reason, e.message) for e in recorder.events] == [ACTIVE_1A, CLEARED_1A]


async def test_a_pool_whose_node_class_is_missing_gets_no_event() -> None:
    now = clock.ManualClock()
    state = _state({}, now)
    orphan = builders.nodepool("orphan", uid="uid-orphan", node_class="missing")
    state.apply(resources.NODEPOOLS, kube_client.WatchEvent(kube_client.ADDED, orphan))
    source, recorder = ScriptedShifts(), events.MemoryRecorder()
    source.next = frozenset({"tstz1-1a"})
    await zonalshift.ZonalShiftController(source, state, recorder=recorder, clock=now).reconcile()
    assert recorder.events == []


class JumpingClock(clock.ManualClock):
    """Time moves by as much as the loop sleeps, at once."""

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)


async def test_the_loop_reads_every_30_seconds_and_survives_a_failed_read() -> None:
    now = JumpingClock()
    reads: list[float] = []

    class Counting(ScriptedShifts):
        async def update(self) -> None:
            reads.append(now.now())
            if len(reads) == 2:
                raise RuntimeError("ARC unavailable")
            if len(reads) == 4:
                raise asyncio.CancelledError  # the leader stopping the loop

    controller = zonalshift.ZonalShiftController(
        Counting(), _state({"default": None}, now), recorder=events.MemoryRecorder(), clock=now
    )
    start = now.now()
    with pytest.raises(asyncio.CancelledError):
        await controller.run()
    assert [t - start for t in reads] == [0.0, 30.0, 60.0, 90.0]


async def test_a_pool_whose_node_class_resolves_during_a_shift_is_told_then() -> None:
    # karpy's own: upstream compares one cluster-wide set, and a class resolved after the shift began never hears.
    now = clock.ManualClock()
    state = _state({"default": None}, now)
    unresolved = builders.ec2nodeclass("default", uid="uid-nc")
    state.apply(resources.EC2NODECLASSES, kube_client.WatchEvent(kube_client.MODIFIED, unresolved))
    source, recorder = ScriptedShifts(), events.MemoryRecorder()
    controller = zonalshift.ZonalShiftController(source, state, recorder=recorder, clock=now)
    source.next = frozenset({"tstz1-1a"})
    await controller.reconcile()
    assert recorder.events == []  # no subnets yet: the pool launches nowhere
    resolved = builders.ec2nodeclass("default", uid="uid-nc", status={"subnets": SUBNETS})
    state.apply(resources.EC2NODECLASSES, kube_client.WatchEvent(kube_client.MODIFIED, resolved))
    await controller.reconcile()
    await controller.reconcile()
    source.next = frozenset()
    await controller.reconcile()
    assert [(e.type, e.reason, e.message) for e in recorder.events] == [ACTIVE_1A, CLEARED_1A]
