"""The optimizer's linear programs, solved by HiGHS through its own binding (`highspy`, imported at the first solve).

Every LP here is `minimise cost·x subject to A_ub·x ≤ b_ub, A_eq·x = b_eq, x ≥ 0`, with the constraint matrices given
as coordinate triplets (`Triplets`) and handed to HiGHS column-wise. The options are those `scipy.optimize.linprog`
(method="highs") used to pass for these LPs, so the optimum found is the same: HiGHS's dual simplex, no output.
scipy took ~50 MB of the controller's RSS (`scipy.sparse` and `scipy.optimize`) for these three calls; highspy ~9 MB.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from karpy.scheduling import catalog

Int32Array = npt.NDArray[np.int32]  # HiGHS's index type (HighsInt) in highspy's wheels

_DUAL_SIMPLEX = 1  # HiGHS option simplex_strategy: kSimplexStrategyDual (lp_data/HConst.h), scipy's choice


@dataclass(frozen=True, slots=True)
class Triplets:
    """A sparse matrix of `shape` (rows, columns) as coordinates: entry (rows[i], cols[i]) is vals[i]; repeated
    coordinates add up."""

    rows: catalog.IntArray
    cols: catalog.IntArray
    vals: catalog.FloatArray
    shape: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Optimum:
    """An optimal point: its cost, the variables and the duals of the `≤` rows (∂cost/∂b_ub, so ≤ 0)."""

    cost: float
    x: catalog.FloatArray
    upper_duals: catalog.FloatArray


def warm() -> None:
    """Import HiGHS now, so that a timed solve does not pay for the import."""
    importlib.import_module("highspy")


def minimize(
    cost: catalog.FloatArray,
    upper: tuple[Triplets, catalog.FloatArray],
    equal: tuple[Triplets, catalog.FloatArray] | None = None,
    *,
    presolve: bool = True,
) -> Optimum | None:
    """The optimum of the LP over `cost` with rows `upper` (A_ub, b_ub) and `equal` (A_eq, b_eq), x ≥ 0; None when
    HiGHS finds no optimum (infeasible, unbounded or failed)."""
    import highspy

    n_col = len(cost)
    blocks = [upper] if equal is None else [upper, equal]
    offsets = np.cumsum([0, *(a.shape[0] for a, _ in blocks)])
    for a, _ in blocks:
        if a.shape[1] != n_col:
            raise ValueError(f"a constraint block has {a.shape[1]} columns for {n_col} variables")
    rows = np.concatenate([a.rows + off for (a, _), off in zip(blocks, offsets, strict=False)]).astype(np.int64)
    cols = np.concatenate([a.cols for a, _ in blocks]).astype(np.int64)
    vals = np.concatenate([a.vals for a, _ in blocks]).astype(np.float64)
    start, index, value = _columnwise(rows, cols, vals, n_col=n_col)
    n_ub = upper[0].shape[0]
    n_row = int(offsets[-1])
    row_upper = np.concatenate([b for _, b in blocks]).astype(np.float64)
    row_lower = row_upper.copy()
    row_lower[:n_ub] = -highspy.kHighsInf

    # The bare solver, highspy's private base class: the public `highspy.Highs` writes HiGHS's banner to stdout (the
    # controller's log stream) as it is built, before any option can be set (highspy/highspy/highs.py: its
    # __init__ takes no arguments and calls enableCallbacks(), which logs the header while output_flag is still
    # true; `silent()` and `output_flag` only apply afterwards). Checked in highspy 1.16.0 and HiGHS's master.
    # tests/scheduling/optimizer/test_lp.py fails if an upgrade drops `_core._Highs`, and tells when the public
    # class stops printing, so this can go.
    h = highspy._core._Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("simplex_strategy", _DUAL_SIMPLEX)
    h.setOptionValue("presolve", "on" if presolve else "off")
    passed = h.passModel(
        n_col,
        n_row,
        len(value),
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        np.ascontiguousarray(cost, dtype=np.float64),
        np.zeros(n_col),
        np.full(n_col, highspy.kHighsInf),
        row_lower,
        row_upper,
        start[:-1],  # HiGHS takes the column starts without the end (num_entries closes the last column)
        index,
        value,
        np.zeros(n_col, dtype=np.int32),  # integrality: every variable continuous (kContinuous = 0)
    )
    if passed != highspy.HighsStatus.kOk:
        raise ValueError(f"HiGHS refused the LP ({n_row} rows, {n_col} columns): {passed}")
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    solution = h.getSolution()
    return Optimum(
        float(h.getInfo().objective_function_value),
        np.asarray(solution.col_value, dtype=np.float64),
        np.asarray(solution.row_dual, dtype=np.float64)[:n_ub],
    )


def _columnwise(
    rows: catalog.IntArray, cols: catalog.IntArray, vals: catalog.FloatArray, *, n_col: int
) -> tuple[Int32Array, Int32Array, catalog.FloatArray]:
    """Coordinates to HiGHS's column-wise (CSC) arrays: column starts, row indices, values. Repeated coordinates are
    summed and zeros dropped, as scipy's `coo_matrix(...).tocsc()` did."""
    order = np.lexsort((rows, cols))
    rows, cols, vals = rows[order], cols[order], vals[order]
    if len(rows):
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        groups = np.cumsum(first) - 1
        vals = np.bincount(groups, weights=vals).astype(np.float64)
        rows, cols = rows[first], cols[first]
        nonzero = vals != 0
        rows, cols, vals = rows[nonzero], cols[nonzero], vals[nonzero]
    start = np.zeros(n_col + 1, dtype=np.int32)
    np.cumsum(np.bincount(cols, minlength=n_col), out=start[1:])
    return start, rows.astype(np.int32), vals.astype(np.float64)
