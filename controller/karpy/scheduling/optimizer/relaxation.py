"""Fewer classes and columns for the pattern LP of `patterns`, with its optimum still a lower bound on every plan.

The pattern LP's rounds grow with the number of classes: topology splits a large solve's claims into many
requirement sets (one per zone a spread or affinity pinned them to), and a real cluster's pods into many request
vectors. `merge` shrinks the classes by a ladder of steps, each taken only while there are more than `limit`:

1. classes with the same request vector and the same compatible columns become one: exact, nothing is lost;
2. classes with the same request vector become one that may use every column any of them could (the union of
   their rows): any plan stays feasible, since each of its nodes is a column that suits the pods it holds, so the
   optimum can only drop. What is lost is which zone (or other requirement) kept pods apart;
3. request vectors are rounded *down* to fewer significant bits per resource, then merged as in 2: a plan's nodes
   hold the smaller pods too, so again every plan stays feasible and the optimum a lower bound.

`distinct_columns` drops columns equal to an earlier one in compatibility, capacity and price: interchangeable, so
the optimum is unchanged (one type's offerings in several zones are such copies once zones no longer tell classes
apart, and the dominance filter of `patterns.undominated` costs time per column).

Pure numpy; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from karpy.scheduling import catalog

_BITS = 63  # significant bits of an int64 request: rounding starts exact


@dataclass(frozen=True, slots=True)
class Classes:
    """Classes for the pattern LP: `vectors` classes × resources (one pod), `sizes` pods per class, `compat`
    classes × columns."""

    vectors: catalog.IntArray
    sizes: catalog.IntArray
    compat: catalog.BoolArray


def merge(
    vectors: catalog.IntArray, sizes: catalog.IntArray, compat: catalog.BoolArray, *, limit: int
) -> Classes | None:
    """At most `limit` classes whose pattern LP optimum is at most the given classes' (the ladder above), or None
    when even one significant bit per resource leaves more."""
    exact = _grouped(vectors, sizes, compat, by_row=True)
    if len(exact.sizes) <= limit:
        return exact
    for bits in range(_BITS, 0, -1):
        rounded = round_down(vectors, bits=bits)
        if len(np.unique(rounded, axis=0)) <= limit:
            return _grouped(rounded, sizes, compat, by_row=False)
    return None


def round_down(vectors: catalog.IntArray, *, bits: int) -> catalog.IntArray:
    """Each positive value with all but its `bits` most significant bits cleared (1500 keeps 1472 at 6 bits, 1024
    at 1): never larger, never zero when it was not. Other values are kept."""
    length = np.zeros(vectors.shape, dtype=np.int64)  # bit length of each positive value, 0 for the rest
    rest = np.maximum(vectors, 0)
    while rest.any():
        length += rest > 0
        rest >>= 1
    shift = np.maximum(length - bits, 0)
    out: catalog.IntArray = (vectors >> shift) << shift
    return out


def distinct_columns(
    compat: catalog.BoolArray, capacity: catalog.FloatArray, price: catalog.FloatArray
) -> catalog.IntArray:
    """Indices of the columns not equal to an earlier one in compatibility (`compat` classes × columns), capacity
    (columns × resources) and price, ascending."""
    n_col = len(price)
    if n_col == 0:
        return np.zeros(0, dtype=np.int64)
    parts = (
        np.packbits(compat, axis=0).T,
        np.ascontiguousarray(capacity, dtype=np.float64).view(np.uint8).reshape(n_col, -1),
        np.ascontiguousarray(price, dtype=np.float64).view(np.uint8).reshape(n_col, -1),
    )
    first, _ = _equal_rows(parts)
    return np.sort(first)


def _grouped(vectors: catalog.IntArray, sizes: catalog.IntArray, compat: catalog.BoolArray, *, by_row: bool) -> Classes:
    """Classes with equal vectors (and, `by_row`, equal compatibility rows) as one: sizes summed, rows ORed."""
    n_cls = len(sizes)
    parts = [np.ascontiguousarray(vectors, dtype=np.int64).view(np.uint8).reshape(n_cls, -1)]
    if by_row:
        parts.append(np.packbits(compat, axis=1))
    first, group = _equal_rows(parts)
    n_grp = len(first)
    merged_sizes = np.zeros(n_grp, dtype=np.int64)
    np.add.at(merged_sizes, group, sizes)
    merged_compat = np.zeros((n_grp, compat.shape[1]), dtype=np.bool_)
    np.logical_or.at(merged_compat, group, compat)
    return Classes(vectors[first], merged_sizes, merged_compat)


def _equal_rows(parts: Sequence[npt.NDArray[np.uint8]]) -> tuple[catalog.IntArray, catalog.IntArray]:
    """Rows of the byte arrays `parts` side by side, grouped when equal: (first row of each group, each row's
    group). Each row is one opaque byte string, which np.unique sorts far faster than the rows themselves."""
    keys = np.ascontiguousarray(np.concatenate(parts, axis=1))
    _, first, group = np.unique(
        keys.view(np.dtype((np.void, keys.shape[1]))).ravel(), return_index=True, return_inverse=True
    )
    return first, group.ravel()
