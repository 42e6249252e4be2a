"""Helpers shared by the operator tests that run the app on a wall clock (import as `from tests.operator import
support`): a bounded poll and a condition lookup."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

POLL = 0.05


async def eventually(check: Callable[[], Any], *, seconds: float = 15.0) -> Any:
    """Poll an async or sync check until it returns something truthy, and return that (bounded: fails after
    `seconds`, naming the check by its docstring)."""
    for _ in range(int(seconds / POLL)):
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        await asyncio.sleep(POLL)
    raise AssertionError(f"not true within {seconds} s: {check.__doc__ or check}")


def condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any]:
    """The status condition `type_` of `obj` ({} when it has none)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return {}
