"""The optimizer's one entry point: the scheduler calls `improve` on first-fit's new claims and `lower_bound` for the
plan's reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from karpy.scheduling import catalog, nodes, topology
from karpy.scheduling.optimizer import bound, localsearch, repack

Bounds = bound.Bounds


def improve(
    claims: Sequence[nodes.Slot],
    *,
    topo: topology.Topology,
    names: Iterator[int],
    expired: Callable[[], bool],
) -> list[nodes.Slot]:
    """`claims` re-packed group by group where that is cheaper (`repack`), then, on solves small enough, searched for
    moves, swaps and emptied claims that lower the cost (`localsearch`); new claims take their hostnames from
    `names`. Every rule first-fit honoured still holds."""
    repacked = repack.repack(claims, topo=topo, names=names)
    return localsearch.improve(repacked, topo=topo, names=names, expired=expired)


def lower_bound(claims: Sequence[nodes.Slot], index: catalog.ResourceIndex) -> Bounds:
    """What the pods on `claims` cost at least: the pattern LP's optimum, and that tightened by what hostname and zone
    rules force (`bound`)."""
    return bound.lower_bound(claims, index)
