"""Why a pod cannot be scheduled, for people: per NodePool the decisive constraint first (for a pod asking 8Ti,
the request no instance type has room for), then the provisioner's own FailedScheduling text, wrapped to the
terminal's width. The JSON keeps the event's words (`reason`, upstream's wording: pkg/controllers/provisioning/
scheduling/events.go prefixes it with "Failed to schedule pod, "); this is only how the tables show it."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy.scheduling import results

FIRST_KINDS: Final = ("resources", "limits")
"""Refusals about the pod's own size come first: raising or lowering a request is the change a user can make."""
DEFAULT_WIDTH: Final = 120


def nodepools(found: results.Diagnosis | None) -> list[dict[str, Any]]:
    """The JSON of a diagnosis's NodePool refusals, decisive ones first (then in the NodePools' weight order)."""
    if found is None:
        return []
    ordered = sorted(found.nodepools, key=lambda p: p.kind not in FIRST_KINDS)
    return [{"nodepool": p.nodepool, "kind": p.kind, "decisive": p.decisive, "message": p.message} for p in ordered]


def _wrap(text: str, *, indent: int, width: int) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(
        text, width=max(width, indent + 40), initial_indent=pad, subsequent_indent=pad + "    ",
        break_on_hyphens=False,
    )  # fmt: skip


def lines(
    pod: str, reason: str, pools: Sequence[Mapping[str, Any]], *, width: int = DEFAULT_WIDTH, indent: int = 2
) -> list[str]:
    """`pod: cannot be scheduled`, a line per NodePool (`nodepool NAME (KIND): decisive constraint`), then the event
    text; long lines wrapped. Without a per-NodePool diagnosis, the event text alone."""
    if not pools:
        return _wrap(f"{pod}: {reason}", indent=indent, width=width)
    out = [f"{' ' * indent}{pod}: cannot be scheduled"]
    for pool in pools:
        out += _wrap(
            f"nodepool {pool['nodepool']} ({pool['kind']}): {pool['decisive']}", indent=indent + 2, width=width
        )
    out += _wrap(f"event text: {reason}", indent=indent + 2, width=width)
    return out
