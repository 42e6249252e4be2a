"""How drifted nodes are replaced under their NodePool's Drifted budgets and the budgets' schedules (pure; core:
pkg/controllers/disruption/helpers.go BuildDisruptionBudgetMapping, pkg/apis/v1/nodepool.go
GetAllowedDisruptionsByReason).

The controller replaces drifted nodes one command at a time, as long as the pool's budget has room: a node being
replaced counts as disrupting until its replacement is up and it is gone. So nodes go in waves of at most what the
budget allows at the wave's start, one replacement time apart; a wave waits for a schedule that allows none to pass.

A wave also lasts longer when its nodes hold more pods under one PodDisruptionBudget than the PDB lets go at once:
termination evicts through the Eviction API, which refuses while the PDB allows no disruption, and retries (core:
pkg/controllers/node/termination/terminator/eviction.go). Modelled simply: the PDB lets `disruptionsAllowed` pods go
per round, and a round lasts `eviction` seconds (an evicted pod rescheduled and Ready again, so the PDB allows the
next); a wave whose nodes hold n pods under a PDB allowing a takes ceil(n / a) - 1 rounds beyond its replacement.
PDBs that allow none are not timed here: they hold the node outright (the plan's holds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpy.api import budgets, nodepool

STEP = 60.0
"""Seconds between the times a blocked budget is looked at again (cron schedules have minute resolution)."""
HORIZON = 7 * 24 * 3600.0
"""How far ahead a budget that allows nothing is searched for a window, before the plan says it never opens."""
REPLACEMENT = 300.0
"""Seconds one replacement takes by default: a node launched and Ready, then the old one drained and gone."""
EVICTION = 60.0
"""Seconds one round of PDB-limited evictions takes by default: the evicted pods rescheduled and Ready again."""


@dataclass(frozen=True, slots=True)
class Hold:
    """A PDB that lets the pods of a wave's nodes go fewer at a time than they are."""

    pdb: str
    pods: int
    """Pods under the PDB on the wave's nodes."""
    allowed: int
    """The PDB's disruptionsAllowed."""
    seconds: float
    """What it adds to the wave: (ceil(pods / allowed) - 1) eviction rounds."""


@dataclass(frozen=True, slots=True)
class Wave:
    start: float
    nodes: int
    duration: float = REPLACEMENT
    """Seconds until the wave's nodes are replaced and gone: the replacement time plus its longest PDB hold."""
    held: tuple[Hold, ...] = ()


@dataclass(frozen=True, slots=True)
class Schedule:
    waves: tuple[Wave, ...]
    finish: float | None
    """When the last replacement can be done at the earliest; None when nothing drifts, or the budgets never let
    the rest go within `HORIZON`."""
    blocked: int = 0
    """Nodes the budgets do not let go within `HORIZON`."""

    @property
    def largest(self) -> int:
        return max((w.nodes for w in self.waves), default=0)


def _allowed(pool: nodepool.NodePool, total: int, at: float) -> int:
    return budgets.allowed_disruptions(pool, nodepool.DisruptionReason.DRIFTED, total, at)


def schedule(
    pool: nodepool.NodePool,
    drifting: int,
    *,
    total: int,
    disrupting: int = 0,
    now: float,
    replacement: float = REPLACEMENT,
    pdb_pods: Sequence[Mapping[str, int]] = (),
    allowed: Mapping[str, int] | None = None,
    eviction: float = EVICTION,
) -> Schedule:
    """The waves `drifting` nodes of `pool` go in, out of `total` counted by the budgets, with `disrupting` of them
    already being disrupted (they use up the first wave's room).

    `pdb_pods`: per drifting node, in the order they go, PDB key -> that node's pods under it; `allowed`: PDB key ->
    its disruptionsAllowed (the module's doc says how they stretch a wave)."""
    waves: list[Wave] = []
    left, at, busy = drifting, now, disrupting
    while left > 0:
        start = at
        room = _allowed(pool, total, start) - busy
        while room <= 0 and start - now < HORIZON:
            start += STEP
            room = _allowed(pool, total, start) - busy
        if room <= 0:
            return Schedule(tuple(waves), None, blocked=left)
        size = min(room, left)
        first = drifting - left
        held = _held(pdb_pods[first : first + size], allowed or {}, eviction)
        duration = replacement + max((h.seconds for h in held), default=0.0)
        waves.append(Wave(start, size, duration, held))
        left -= size
        at, busy = start + duration, 0
    finish = waves[-1].start + waves[-1].duration if waves else None
    return Schedule(tuple(waves), finish)


def _held(nodes: Sequence[Mapping[str, int]], allowed: Mapping[str, int], eviction: float) -> tuple[Hold, ...]:
    pods: dict[str, int] = {}
    for node in nodes:
        for pdb, count in node.items():
            pods[pdb] = pods.get(pdb, 0) + count
    out = []
    for pdb, count in sorted(pods.items()):
        room = allowed.get(pdb, 0)
        if 0 < room < count:
            out.append(Hold(pdb, count, room, (math.ceil(count / room) - 1) * eviction))
    return tuple(out)


def describe(pool: nodepool.NodePool) -> list[str]:
    """The budgets that apply to drift, as written ("10%", "0 during 0 9 * * 1-5 for 8h")."""
    out = []
    for b in pool.disruption.budgets:
        if b.reasons is not None and nodepool.DisruptionReason.DRIFTED not in b.reasons:
            continue
        when = f" during {b.schedule} for {_duration(b.duration or 0.0)}" if b.schedule is not None else ""
        out.append(f"{b.nodes}{when}")
    return out


def _duration(seconds: float) -> str:
    """As a NodePool writes it ("8h", "90m", "45s")."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
