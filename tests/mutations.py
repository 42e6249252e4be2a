"""Helpers of the mutation-based tests (the core-kind schema agreement and the fuzz suite)."""

from __future__ import annotations

from typing import Any


def positions(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list indexes) below `value`, parents before children."""
    out = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += positions(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += positions(item, (*path, i))
    return out


def parent_of(obj: Any, path: tuple[Any, ...]) -> Any:
    """The container holding the value at `path`."""
    for step in path[:-1]:
        obj = obj[step]
    return obj
