"""Hand the C heap's free pages back to the OS after a large transient parse: glibc's `malloc_trim`, Linux only; and
cap how many heaps (arenas) glibc keeps: `mallopt(M_ARENA_MAX)`.

botocore parses a DescribeInstanceTypes answer (all ~1,400 shapes in one page from some endpoints, ~6 MB of XML) in
the worker thread that made the call, and glibc serves that thread from an arena of its own. Once the records are
compacted and dropped, their free chunks sit among live ones, so neither heap can shrink from its top and the
process keeps them as RSS. `malloc_trim(0)` gives back every whole free page of every arena (madvise); live memory
is untouched. Measured with bench/catalog_memory.py on the emulated account: the cold catalog build raised RSS by
96 MB, by 35 MB with a trim after it. Where there is no glibc (musl, macOS, Windows) `release` does nothing.

glibc gives a thread that finds the heaps busy an arena of its own, up to 8 per core, and an arena keeps its free
pages between trims. `karpy run` allocates from the event loop and from the default executor's threads (boto3
calls and their parsing, the provisioner's solves: `asyncio.to_thread`), so each of those threads can grow a heap
of its own that the others never reuse. `limit_arenas` caps them (MALLOC_ARENA_MAX's effect, set from inside the
process, which the image's distroless base cannot take from a shell); the threads then share heaps, trading a
little lock contention, negligible beside the GIL they already share, for their memory.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any

ARENAS = 2
"""Heaps `karpy run` lets glibc keep (`limit_arenas`): the main one and one the worker threads share."""
_M_ARENA_MAX = -8
"""mallopt's parameter number for the arena cap (glibc's malloc.h)."""


def _libc_function(name: str) -> Any:
    """`name` from the process's own C library on Linux; None where there is none (not glibc, not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `count` before threads start allocating; False where there is no `mallopt`."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, count))


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    trim = _libc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    found: Callable[[int], int] = trim
    return found


def release() -> bool:
    """Return the C heap's free pages to the OS; False where there is no `malloc_trim` to call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
