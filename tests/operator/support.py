"""Helpers shared by the operator tests that run the app on a wall clock (import as `from tests.operator import
support`): a condition lookup. They wait with `tests.polling.until`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any]:
    """The status condition `type_` of `obj` ({} when it has none)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return {}
