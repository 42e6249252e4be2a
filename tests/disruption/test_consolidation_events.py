"""ConsolidationCandidate and ConsolidationRejected (core: disruption/events/events.go, types.go
EmitCandidateEvents / EmitRejectedEvents): each source Node and NodeClaim of a consolidation command hears of it
when it is computed, and of its rejection when it fails its re-check; emptiness announces nothing."""

from __future__ import annotations

import asyncio

from tests.disruption import world as disruption_world

from karpy.disruption import consolidationevents

CANDIDATE = consolidationevents.CONSOLIDATION_CANDIDATE
REJECTED = consolidationevents.CONSOLIDATION_REJECTED


def _events(w: disruption_world.World, reason: str) -> list[tuple[str, str, str]]:
    return [(e.kind, e.name, e.message) for e in w.recorder.events if e.reason == reason]


def _two_nodes_one_would_do() -> disruption_world.World:
    """Two c4 nodes with a 1-CPU pod each: either pod fits beside the other (test_scenarios' single-node delete)."""
    w = disruption_world.World()
    w.pool()
    for node in ("a", "b"):
        w.node(node)
        w.pod(f"p{node}", node, cpu="1")
    return w


async def test_a_consolidation_command_is_announced_on_its_node_and_nodeclaim() -> None:
    w = _two_nodes_one_would_do()
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    (source,) = cmd.candidates
    message = (
        f"Consolidation candidate: Underutilized: delete: nodepools=[default]: [{source.node_name}] (savings: $0.20)"
        " (savings: $0.20)"
    )
    assert sorted(_events(w, CANDIDATE)) == [
        ("Node", source.node_name, message),
        ("NodeClaim", source.name, message),
    ]
    assert _events(w, REJECTED) == []


async def test_a_command_that_fails_its_recheck_is_rejected_with_upstreams_reason() -> None:
    w = _two_nodes_one_would_do()
    ctrl = w.controller()
    w.sync()
    task = asyncio.create_task(ctrl.reconcile())
    await w.clock.run_for(5)
    (announced,) = {name for kind, name, _ in _events(w, CANDIDATE) if kind == "Node"}
    other = "b" if announced == "a" else "a"
    w.pod("filler", other, cpu="3")  # the node its pod was to move to fills up meanwhile
    w.sync()
    await w.clock.run_for(11)
    assert (await task).command is None
    rejected = _events(w, REJECTED)
    assert sorted((kind, name) for kind, name, _ in rejected) == [("Node", announced), ("NodeClaim", announced)]
    assert all(", reason: scheduling (savings: $0.20)" in message for _, _, message in rejected)


async def test_emptiness_announces_nothing() -> None:
    w = disruption_world.World()
    w.pool()
    w.node("empty")
    cmd = await w.reconcile(w.controller())
    assert cmd is not None
    assert cmd.method == "emptiness"
    assert _events(w, CANDIDATE) == []
