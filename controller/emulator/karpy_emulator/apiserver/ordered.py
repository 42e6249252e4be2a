"""The live keys of one resource in a LIST's order (namespace, then name), kept sorted as objects come and go.

The API server lists in key order (etcd's range reads; the watch cache's sorted store), so a LIST never sorts: it
reads a range. Sorting every matching object on every read instead made the emulation's LISTs, and its stand-ins'
reads of 10,000 pods a few times a second, cost the cluster's size times the reads. Kept here, an insertion or a
removal costs a binary search and a move of the list's tail (a memmove, microseconds at 50,000 keys), and a read
of one namespace walks only that namespace's range.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")

Position = tuple[str, str]
"""Where an object sorts: (namespace, "" when cluster-scoped; name)."""


class OrderedKeys(Generic[K]):
    """Keys (the store's, of one resource) by `Position`; one key per position."""

    def __init__(self) -> None:
        self._positions: list[Position] = []
        self._keys: dict[Position, K] = {}

    def __len__(self) -> int:
        return len(self._positions)

    def add(self, position: Position, key: K) -> None:
        if position not in self._keys:
            bisect.insort(self._positions, position)
        self._keys[position] = key

    def discard(self, position: Position) -> None:
        if self._keys.pop(position, None) is not None:
            del self._positions[bisect.bisect_left(self._positions, position)]

    def in_order(self, namespace: str | None = None, *, after: Position | None = None) -> Iterator[K]:
        """The keys in LIST order, only those of `namespace` when given (a range, not a scan), only those past
        `after` when given (where a paginated LIST's previous page ended: the next page costs its own size)."""
        positions = self._positions
        if namespace is None:
            start, stop = 0, len(positions)
        else:
            # (namespace, "") sorts before every object of the namespace (a name is never empty); namespace + NUL
            # after all of them and before any longer namespace that starts with it (a name never holds NUL).
            start = bisect.bisect_left(positions, (namespace, ""))
            stop = bisect.bisect_left(positions, (namespace + "\0", ""), lo=start)
        if after is not None:
            start = max(start, bisect.bisect_right(positions, after, lo=start, hi=stop))
        keys = self._keys
        for position in positions[start:stop]:  # a copy (a memcpy): a caller may write between two keys
            key = keys.get(position)
            if key is not None:
                yield key
