"""Hypothesis strategies for JSON documents, one recursive shape for every test that needs arbitrary JSON."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def trees(
    leaves: st.SearchStrategy[Any], *, keys: st.SearchStrategy[str], width: int = 3, max_leaves: int = 12
) -> st.SearchStrategy[Any]:
    """JSON values built from `leaves`: lists and objects (with `keys`) of at most `width` items, nested."""
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=width) | st.dictionaries(keys, inner, max_size=width),
        max_leaves=max_leaves,
    )


def objects(values: st.SearchStrategy[Any], *, keys: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Top-level JSON objects (what a manifest or a patch is) of up to four `values`."""
    return st.dictionaries(keys, values, max_size=4)
