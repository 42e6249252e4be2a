"""The Balanced policy's reports (core: disruption/balanced.go ApproveCommand, EmitMultiNodeEvents):
karpenter_consolidation_moves_total per pool of each judged move, karpenter_consolidation_score per Balanced pool,
and ConsolidationApproved on the sources of an approved single-node move (on the NodePool of a multi-node one)."""

from __future__ import annotations

import math

import pytest
from tests.disruption import world as disruption_world
from tests.runtime import exporting

from karpy.api import nodepool
from karpy.disruption import consolidation, consolidationevents
from karpy.runtime import metrics

Reason = nodepool.DisruptionReason


async def test_an_approved_single_node_move_is_counted_scored_and_announced() -> None:
    w = disruption_world.World()
    w.pool(policy="Balanced")
    for node in ("a", "b"):
        w.node(node)
        w.pod(f"p{node}", node, cpu="1")
    m = metrics.Metrics()
    cmd = await w.reconcile(w.controller(metrics=m.disruption_hooks()))
    assert cmd is not None
    assert cmd.method == "single-node-consolidation"
    labels = (("decision", "approved"), ("nodepool", "default"), ("policy", "Balanced"))
    assert exporting.samples(m, "karpenter_consolidation_moves_total") == {labels: 1.0}
    assert exporting.samples(m, "karpenter_consolidation_score_count") == {labels: 1.0}
    # half the cost saved for half the disruption: a score of 1
    assert exporting.samples(m, "karpenter_consolidation_score_sum") == {labels: 1.0}
    (source,) = cmd.candidates
    approved = [(e.kind, e.name, e.message) for e in w.recorder.events if e.reason == "ConsolidationApproved"]
    message = "score 1.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 50.0%)"
    assert sorted(approved) == [("Node", source.node_name, message), ("NodeClaim", source.name, message)]


def test_every_pool_of_a_rejected_move_counts_it_and_only_balanced_pools_are_scored() -> None:
    balanced = disruption_world.candidate("a1", pool="a", policy="Balanced", price=0.2, reschedule_cost=3.0)
    balanced_rest = disruption_world.candidate("a2", pool="a", policy="Balanced", price=0.8, reschedule_cost=1.0)
    other = disruption_world.candidate("b1", pool="b", price=0.2)
    command = consolidation.Command("multi-node-consolidation", Reason.UNDERUTILIZED, (balanced, other))
    scored = consolidation.Scored(command, consolidation.balanced_scores(command, [balanced, balanced_rest, other]))
    got = {
        v.pool.name: (v.move, v.policy, v.score_decision if v.score else None)
        for v in consolidationevents.verdicts(scored)
    }
    assert got == {"a": ("rejected", "Balanced", "rejected"), "b": ("rejected", "WhenEmptyOrUnderutilized", None)}
    assert consolidationevents.approved_sources(scored) == ()  # a multi-node move is told its NodePools


@pytest.mark.parametrize(
    ("savings", "disruption", "score", "approved"),
    [
        (0.25, 2.0, 0.5, True),  # (0.25/1) / (2/4): exactly 1/K
        (0.25, 3.0, 1 / 3, False),
        (0.0, 2.0, 0.0, False),  # nothing saved
        (0.25, 0.0, math.inf, True),  # nothing disrupted
    ],
)
def test_scores_are_upstreams(savings: float, disruption: float, score: float, approved: bool) -> None:
    got = consolidation.balanced_score(savings=savings, disruption=disruption, pool_cost=1.0, pool_disruption=4.0)
    assert (got.score, got.approved) == (pytest.approx(score), approved)
