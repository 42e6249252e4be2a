"""Turn a group's pods (counts per request shape) into node patterns with repeat counts: the repack's packer.

Pure numpy over shapes and instance types (no pods, no claims): `pack` returns (pods per shape on one node, number
of such nodes) pairs covering the counts exactly, guided by the pattern LP of `patterns` (up to
`bound.PATTERN_CLASSES` shapes) or the per-resource LP of `bound`, with a greedy fill for what is left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from karpy.scheduling import catalog
from karpy.scheduling.optimizer import bound, patterns

_ROUNDS = 3  # pattern LPs solved on what is left before the last one's fractions are rounded up
# Groups of at most this many pods also re-plan what the rounding left over (the pods of the large types' fractional
# nodes) with whole patterns only: there one badly filled node is a large share of the cost, and the LPs are small.
REPLAN_PODS = 400
_REPLAN_WORTH = 0.02  # re-plan only a leftover plan dearer than its per-resource LP bound by more than this
_REPLAN_ROUNDS = 12  # pattern LPs the re-plan may solve (each places at least one node)


@dataclass(frozen=True, slots=True)
class Types:
    """The group's candidate instance types (indices into the pool's types) and what the packer reads of them."""

    ids: catalog.IntArray
    usable: catalog.IntArray  # allocatable minus daemon overhead, types × resources
    price: catalog.FloatArray
    anchor: catalog.BoolArray  # types a node may be filled up to while keeping minValues


def collapsed(cand: Types, usable: catalog.IntArray) -> Types:
    """`cand` with room `usable` (never more than a type's own), types of equal room and minValues anchoring
    collapsed into the cheapest (the first on a tie): a plan never needs a dearer one, and every type less is a
    column fewer for the pattern LP to price."""
    order = np.lexsort((np.arange(len(cand.price)), cand.price))
    rows = np.concatenate([usable, cand.anchor[:, None].astype(np.int64)], axis=1)[order]
    _, first = np.unique(rows, axis=0, return_index=True)
    keep = np.sort(order[first])
    return Types(cand.ids[keep], usable[keep], cand.price[keep], cand.anchor[keep])


def pack(
    req: catalog.IntArray,
    counts: catalog.IntArray,
    cand: Types,
    *,
    replan_pods: int = REPLAN_PODS,
    pattern_shapes: int = bound.PATTERN_CLASSES,
) -> list[tuple[catalog.IntArray, int]] | None:
    """Patterns (pods per shape on one node) with repeat counts, covering `counts` exactly; None if impossible.

    Up to `bound.PATTERN_CLASSES` shapes the pattern LP's rounding (`_round_patterns`) places nearly everything;
    beyond, its rounds would cost seconds, so the per-resource LP's shares fill whole nodes of each type it buys.
    What is left goes to the cheapest type that takes all of it, or else to an LP-guided greedy fill. In a group of
    at most `replan_pods` pods (and pattern LP path) whose leftover plan is well above its LP bound, `_replan` plans
    those pods again with whole patterns only, and its plan is kept when cheaper."""
    fits = (req[:, None, :] <= cand.usable[None, :, :]).all(axis=2) & cand.anchor[None, :]  # shapes × types
    if not fits.any(axis=1).all():
        return None
    out: list[tuple[catalog.IntArray, int]] = []
    tail = None  # where the rounded part of the plan (fractions rounded up, and what is left) begins
    if len(req) <= pattern_shapes:
        rounding = _round_patterns(req, counts, fits, cand, out)
        left, tail = (None, None) if rounding is None else rounding
    else:
        left = _fill_lp_shares(req, counts, fits, cand, out)
    if left is None:
        return None
    while left.any():
        demand = left @ req
        present = left > 0
        whole_fit = cand.anchor & (cand.usable >= demand[None, :]).all(axis=1) & fits[present].all(axis=0)
        if whole_fit.any():
            out.append((left.copy(), 1))
            break
        solution_lp = _lp(req, left, fits, cand)
        if solution_lp is None:
            return None
        t = int(np.argmax(solution_lp.nodes))
        movable = np.where(fits[:, t], left, 0)
        pattern = _fill_node(
            req, movable, cand.usable[t], share=1.0 / max(1.0, _node_equivalents(req, movable, cand.usable[t]))
        )
        if not pattern.any():
            return None
        reps = _repeats(movable, pattern, limit=max(1, int(solution_lp.nodes[t])))
        out.append((pattern, reps))
        left -= pattern * reps
    if tail is not None and tail < len(out) and int(counts.sum()) <= replan_pods:
        tail_pods = sum((p * r for p, r in out[tail:]), np.zeros_like(counts))
        rest_cost = _cost(req, fits, cand, out[tail:])
        relaxed = _lp(req, tail_pods, fits, cand)  # a lower bound on any plan for those pods
        if relaxed is not None and rest_cost > relaxed.cost * (1 + _REPLAN_WORTH):
            better = _replan(req, tail_pods, fits, cand, below=rest_cost)
            if better is not None and _cost(req, fits, cand, better) < rest_cost * (1 - 1e-9):
                out[tail:] = better
    return out


def _round_patterns(
    req: catalog.IntArray,
    counts: catalog.IntArray,
    fits: catalog.BoolArray,
    cand: Types,
    out: list[tuple[catalog.IntArray, int]],
) -> tuple[catalog.IntArray, int] | None:
    """Append the pattern LP's whole copies (and, for large types, whole nodes filled with the pods it gave them),
    solving again for what is left up to `_ROUNDS` times, then the last solution's fractional patterns rounded up
    one at a time, largest fraction first, each trimmed to the pods still unplaced. Returns what is left and where
    in `out` the rounded-up fractions begin."""
    left = counts.copy()
    solution: patterns.Solution | None = None
    for attempt in range(_ROUNDS):
        solution = patterns.solve(req, left, fits, cand.usable, cand.price, seed=solution, prove=False)
        if solution is None:
            return None
        before = left.copy()
        whole, left = _take_whole(solution, left, out)
        share = np.minimum(np.floor(solution.pods + 1e-9).astype(np.int64), left[:, None])
        left = _fill_bought(req, share, solution.nodes, left, cand, out)
        if not left.any():
            return left, len(out)
        if attempt < _ROUNDS - 1 and (left != before).any():
            continue  # solve again for what is left
        rounded = len(out)
        fraction = solution.pattern_nodes - whole
        for p in np.argsort(-fraction, kind="stable"):
            if fraction[p] <= 1e-9 or not left.any():
                break
            trimmed = np.minimum(solution.patterns[p], left)
            if trimmed.any():
                out.append((trimmed, 1))
                left = left - trimmed
        return left, rounded
    return left, len(out)


def _replan(
    req: catalog.IntArray, counts: catalog.IntArray, fits: catalog.BoolArray, cand: Types, *, below: float
) -> list[tuple[catalog.IntArray, int]] | None:
    """Another plan for the pods `counts` (what the rounding left over) from pattern LPs in which every type is
    bought as whole patterns, so there are no fractional large nodes to round: each round takes its solution's
    whole copies (or, when there are none, its largest fraction rounded up, trimmed to the pods left) and solves
    again for the rest. Only types cheaper than `below` (the current plan's cost: a cheaper plan buys none dearer).
    None when that fails within `_REPLAN_ROUNDS`."""
    cheap = fits & (cand.price < below)[None, :]
    out: list[tuple[catalog.IntArray, int]] = []
    left = counts.copy()
    solution: patterns.Solution | None = None
    for _ in range(_REPLAN_ROUNDS):
        solution = patterns.solve(
            req, left, cheap, cand.usable, cand.price, prove=False, small_items=int(left.sum()), seed=solution
        )
        if solution is None:
            return None
        before = left.copy()
        whole, left = _take_whole(solution, left, out)
        if (left == before).all():
            p = int(np.argmax(solution.pattern_nodes - whole))
            trimmed = np.minimum(solution.patterns[p], left)
            if not trimmed.any():
                return None
            out.append((trimmed, 1))
            left = left - trimmed
        if not left.any():
            return out
    return None


def _pattern_prices(
    req: catalog.IntArray, fits: catalog.BoolArray, cand: Types, pats: catalog.IntArray
) -> catalog.FloatArray:
    """Per pattern: the price of the cheapest type (a minValues anchor) that every one of its shapes fits and that
    holds all of its pods; inf when none does."""
    used = pats @ req  # patterns × resources
    holds = (cand.usable[None, :, :] >= used[:, None, :]).all(axis=2)  # patterns × types
    shapes_fit = ((pats > 0).astype(np.int64) @ (~fits).astype(np.int64)) == 0
    ok = holds & shapes_fit & cand.anchor[None, :]
    out: catalog.FloatArray = np.where(ok, cand.price[None, :], np.inf).min(axis=1)
    return out


def _cost(
    req: catalog.IntArray, fits: catalog.BoolArray, cand: Types, plan: list[tuple[catalog.IntArray, int]]
) -> float:
    """A plan's $/h, each node at the cheapest type that holds its pattern (inf when none does)."""
    if not plan:
        return 0.0
    pats = np.array([p for p, _ in plan], dtype=np.int64)
    reps = np.array([r for _, r in plan], dtype=np.float64)
    return float(_pattern_prices(req, fits, cand, pats) @ reps)


def _fill_lp_shares(
    req: catalog.IntArray,
    counts: catalog.IntArray,
    fits: catalog.BoolArray,
    cand: Types,
    out: list[tuple[catalog.IntArray, int]],
) -> catalog.IntArray | None:
    """Append whole nodes of each type the per-resource LP buys, filled with the pods it gave that type; return
    what is left."""
    solution = _lp(req, counts, fits, cand)
    if solution is None:
        return None
    left = counts.copy()
    assigned = np.floor(solution.share * counts[:, None] + 1e-9).astype(np.int64)
    return _fill_bought(req, assigned, solution.nodes, left, cand, out)


def _fill_bought(
    req: catalog.IntArray,
    given: catalog.IntArray,
    nodes: catalog.FloatArray,
    left: catalog.IntArray,
    cand: Types,
    out: list[tuple[catalog.IntArray, int]],
) -> catalog.IntArray:
    """Append whole nodes of each type an LP bought at least one of (most first), filled with the pods it `given`
    that type (pod class × type) and still unplaced; return `left`, updated in place, with what did not fit."""
    for t in np.argsort(-nodes, kind="stable"):
        if nodes[t] < 1 - 1e-9:
            break
        mine = np.minimum(given[:, t], left)
        left -= mine
        left += _fill_type(req, mine, cand.usable[t], out)
    return left


def _take_whole(
    solution: patterns.Solution, left: catalog.IntArray, out: list[tuple[catalog.IntArray, int]]
) -> tuple[catalog.IntArray, catalog.IntArray]:
    """Append each pattern's whole copies in the LP's solution, most copies first, each trimmed to the pods `left`;
    return the whole copy counts and the pods still left."""
    whole = np.floor(solution.pattern_nodes + 1e-9).astype(np.int64)
    for p in np.argsort(-solution.pattern_nodes, kind="stable"):
        left = _take(solution.patterns[p], int(whole[p]), left, out)
    return whole, left


def _take(
    pattern: catalog.IntArray, copies: int, left: catalog.IntArray, out: list[tuple[catalog.IntArray, int]]
) -> catalog.IntArray:
    """Append up to `copies` nodes of `pattern` while the pods are still unplaced; return what is left."""
    used = pattern > 0
    if copies <= 0 or not used.any():
        return left
    reps = min(copies, int((left[used] // pattern[used]).min()))
    if reps:
        out.append((pattern.copy(), reps))
        left = left - pattern * reps
    return left


def _lp(req: catalog.IntArray, counts: catalog.IntArray, fits: catalog.BoolArray, cand: Types) -> bound.Solution | None:
    demand = (req * counts[:, None]).astype(np.float64)
    present = counts > 0
    full = np.zeros((len(counts), len(cand.price)))
    got = bound.solve_lp(demand[present], fits[present], cand.usable.astype(np.float64), cand.price)
    if got is None:
        return None
    full[present] = got.share
    return bound.Solution(got.cost, got.nodes, full)


def _fill_type(
    req: catalog.IntArray, mine: catalog.IntArray, cap: catalog.IntArray, out: list[tuple[catalog.IntArray, int]]
) -> catalog.IntArray:
    """Fill whole nodes of capacity `cap` from `mine` while at least one node's worth remains; return the rest."""
    while mine.any():
        equivalents = _node_equivalents(req, mine, cap)
        if equivalents < 1:
            break
        pattern = _fill_node(req, mine, cap, share=1.0 / equivalents)
        if not pattern.any():
            break
        reps = _repeats(mine, pattern, limit=max(1, int(equivalents)))
        out.append((pattern, reps))
        mine = mine - pattern * reps
    return mine


def _node_equivalents(req: catalog.IntArray, counts: catalog.IntArray, cap: catalog.IntArray) -> float:
    demand = (counts @ req).astype(np.float64)
    need = demand > 0
    if np.any(need & (cap <= 0)):
        return float("inf")
    return float((demand[need] / cap[need]).max()) if need.any() else 0.0


def _repeats(counts: catalog.IntArray, pattern: catalog.IntArray, *, limit: int) -> int:
    used = pattern > 0
    return int(min(limit, int((counts[used] // pattern[used]).min())))


def _fill_node(
    req: catalog.IntArray, counts: catalog.IntArray, cap: catalog.IntArray, *, share: float
) -> catalog.IntArray:
    """One node's pods per shape: a `share` slice of every shape, then the best-aligned pod that fits, one at a time."""
    take: catalog.IntArray = np.floor(counts * min(share, 1.0)).astype(np.int64)
    free = cap - take @ req
    if (free < 0).any():
        take = np.zeros_like(counts)
        free = cap.copy()
    left = counts - take
    weight = np.where(cap > 0, 1.0 / np.maximum(cap, 1), 0.0)
    norm = req * weight  # shapes × resources, in fractions of the node
    while True:
        ok = (left > 0) & (req <= free[None, :]).all(axis=1)
        if not ok.any():
            return take
        score = np.where(ok, norm @ (free * weight), -np.inf)
        s = int(np.argmax(score))
        take[s] += 1
        left[s] -= 1
        free = free - req[s]
