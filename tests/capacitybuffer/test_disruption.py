"""Disruption keeps a buffer's room: emptiness leaves a node the provisioner placed virtual pods on (upstream's
pkg/controllers/disruption/emptiness_test.go "Buffer pod protection", each case naming its `It`), and consolidation's
simulations schedule the virtual pods with the pending ones, so a move that would drop the room needs a replacement
(core: provisioning/buffers.go, "Consolidation naturally accounts for buffer pods")."""

from __future__ import annotations

from tests.disruption import world as disruption_world

from karpy.api import nodepool
from karpy.disruption import blockers
from karpy.scheduling import pods
from karpy.state import virtualpods

Reason = nodepool.DisruptionReason


def _room(w: disruption_world.World, replicas: int, cpu: str) -> None:
    """A ready buffer's virtual pods in the state cache, as the buffer controller puts them there."""
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    manifests = virtualpods.manifests(namespace="default", name="warm", uid="u", template=template, replicas=replicas)
    w.cluster.virtual_pods.update("default/warm", [pods.from_manifest(m) for m in manifests])


async def _empty_deleted(w: disruption_world.World) -> list[str]:
    cmd = await w.reconcile(w.controller())
    if cmd is None:
        return []
    assert cmd.reason == Reason.EMPTY
    return sorted(c.name for c in cmd.candidates)


async def test_should_not_disrupt_a_node_that_hosts_virtual_buffer_pods_only_that_node() -> None:
    """ "should not disrupt a node that hosts virtual buffer pods", "should only protect the specific node with
    buffer pods, not others"; the node gets upstream's Unconsolidatable event."""
    w = disruption_world.World()
    w.pool()
    w.node("n1")
    w.node("n2")
    w.cluster.place_buffer_pods({"n1": 2})
    assert await _empty_deleted(w) == ["n2"]
    unconsolidatable = [e for e in w.recorder.events if e.reason == blockers.UNCONSOLIDATABLE]
    assert [e.message for e in unconsolidatable][:1] == ['Node "n1" has buffer pods']


async def test_should_disrupt_a_node_once_buffer_pods_are_cleared() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n1")
    w.cluster.place_buffer_pods({"n1": 1})
    assert await _empty_deleted(w) == []
    w.cluster.place_buffer_pods({})  # the buffer shrank or went: the next pass places no virtual pod there
    assert await _empty_deleted(w) == ["n1"]


async def test_should_not_protect_a_node_with_zero_buffer_pod_count() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("n1")
    w.cluster.place_buffer_pods({"n1": 0})
    assert await _empty_deleted(w) == ["n1"]


def _two_busy_nodes() -> disruption_world.World:
    """Two 4-CPU nodes with a 1-CPU pod each: consolidation would fold them into one."""
    w = disruption_world.World()
    w.pool()
    for node, pod in (("a", "p1"), ("b", "p2")):
        w.node(node)
        w.pod(pod, node)
    return w


async def test_consolidation_keeps_the_room_a_buffer_asks_for_and_releases_it_when_it_shrinks() -> None:
    w = _two_busy_nodes()
    _room(w, 2, "1500m")  # 3 CPUs: more than one 4-CPU node has left once it holds both real pods
    kept = await w.reconcile(w.controller())
    # b goes, but only for a cheaper node that takes the virtual pod a cannot: the room is kept
    assert kept is not None
    assert kept.decision == "replace"
    assert len(kept.replacements) == 1
    w2 = _two_busy_nodes()
    _room(w2, 1, "500m")  # a smaller buffer: both real pods and its room fit on one node
    released = await w2.reconcile(w2.controller())
    assert released is not None
    assert released.decision == "delete"


def test_a_change_of_where_buffer_pods_are_moves_the_clusters_seq() -> None:
    """Emptiness remembers the `seq` at which it found nothing to do: a node losing its buffer pods must move it,
    or the node would wait for an unrelated change (or the forced revalidation) to be found empty."""
    w = disruption_world.World()
    before = w.cluster.seq
    w.cluster.place_buffer_pods({"n1": 2})
    placed = w.cluster.seq
    assert placed != before
    w.cluster.place_buffer_pods({"n1": 2, "n2": 0})  # the same placement
    assert w.cluster.seq == placed
    w.cluster.place_buffer_pods({})
    assert w.cluster.seq != placed
