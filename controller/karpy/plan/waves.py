"""How drifted nodes are replaced under their NodePool's Drifted budgets and the budgets' schedules (pure; core:
pkg/controllers/disruption/helpers.go BuildDisruptionBudgetMapping, pkg/apis/v1/nodepool.go
GetAllowedDisruptionsByReason).

The controller replaces drifted nodes one command at a time, as long as the pool's budget has room: a node being
replaced counts as disrupting until its replacement is up and it is gone. So nodes go in waves of at most what the
budget allows at the wave's start, one replacement time apart; a wave waits for a schedule that allows none to pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.api import budgets, nodepool

STEP = 60.0
"""Seconds between the times a blocked budget is looked at again (cron schedules have minute resolution)."""
HORIZON = 7 * 24 * 3600.0
"""How far ahead a budget that allows nothing is searched for a window, before the plan says it never opens."""
REPLACEMENT = 300.0
"""Seconds one replacement takes by default: a node launched and Ready, then the old one drained and gone."""


@dataclass(frozen=True, slots=True)
class Wave:
    start: float
    nodes: int


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
) -> Schedule:
    """The waves `drifting` nodes of `pool` go in, out of `total` counted by the budgets, with `disrupting` of them
    already being disrupted (they use up the first wave's room)."""
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
        waves.append(Wave(start, size))
        left -= size
        at, busy = start + replacement, 0
    finish = waves[-1].start + replacement if waves else None
    return Schedule(tuple(waves), finish)


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
