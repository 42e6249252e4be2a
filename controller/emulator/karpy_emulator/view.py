"""What the demo shows: a frame of the cluster as plain text lines, and the closing summary (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClaimRow:
    name: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    """$/hour of the offering, None while the claim has not launched."""
    state: str
    """"launching", "registered", "ready" or "deleting"."""


@dataclass(frozen=True, slots=True)
class Frame:
    step: str
    elapsed: float
    pods: int
    pending: int
    claims: tuple[ClaimRow, ...]
    nodes: int
    nodes_ready: int
    events: tuple[str, ...]

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price or 0.0 for c in self.claims if c.state != "deleting")


@dataclass(frozen=True, slots=True)
class StepReport:
    replicas: int
    seconds: float
    nodes: int
    cost_per_hour: float
    settled: bool


@dataclass(frozen=True, slots=True)
class Summary:
    steps: tuple[StepReport, ...]
    launched: int
    terminated: int
    peak_nodes: int
    seconds: float

    @property
    def ok(self) -> bool:
        return all(s.settled for s in self.steps)


def render(frame: Frame) -> list[str]:
    lines = [
        f"[{frame.elapsed:6.1f}s] {frame.step}",
        f"  pods: {frame.pods} ({frame.pending} pending)   nodes: {frame.nodes_ready}/{frame.nodes} ready   "
        f"nodeclaims: {len(frame.claims)}   cost: ${frame.cost_per_hour:.4f}/h",
    ]
    for c in frame.claims:
        price = f"${c.price:.4f}/h" if c.price is not None else "-"
        lines.append(
            f"    {c.name:<16} {c.instance_type or '?':<14} {c.zone or '?':<12} {c.capacity_type or '?':<10} "
            f"{price:>11}  {c.state}"
        )
    if frame.events:
        lines.append("  recent:")
        lines.extend(f"    {e}" for e in frame.events)
    return lines


def render_summary(summary: Summary) -> list[str]:
    lines = [
        "summary:",
        f"  nodes launched: {summary.launched}   terminated: {summary.terminated}   peak nodes: {summary.peak_nodes}",
        f"  {'replicas':>8}  {'settled in':>10}  {'nodes':>5}  {'cost':>12}",
    ]
    for s in summary.steps:
        mark = "" if s.settled else "  NOT SETTLED"
        lines.append(f"  {s.replicas:>8}  {s.seconds:>9.1f}s  {s.nodes:>5}  ${s.cost_per_hour:>9.4f}/h{mark}")
    lines.append(f"  total: {summary.seconds:.1f}s — {'ok' if summary.ok else 'FAILED'}")
    return lines


def trim(lines: Sequence[str], limit: int) -> list[str]:
    """At most `limit` lines, saying how many were left out."""
    if len(lines) <= limit:
        return list(lines)
    return [*lines[: limit - 1], f"    ... {len(lines) - limit + 1} more"]
