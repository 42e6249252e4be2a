"""The optimizer's LPs on highspy: the same optima and sparse arrays as scipy (the solver they replace, kept in the
dev group as the reference), known small cases, and a controller solve that never imports scipy."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import optimize, sparse
from scipy.sparse import csgraph

from karpy.scheduling.optimizer import bound, lp


def _triplets(dense: np.ndarray) -> lp.Triplets:
    rows, cols = np.nonzero(dense)
    return lp.Triplets(rows, cols, dense[rows, cols].astype(np.float64), (dense.shape[0], dense.shape[1]))


def test_a_covering_lp_with_a_known_optimum_and_duals() -> None:
    # min x0 + x1 subject to x0 + 2·x1 ≥ 4 and 3·x0 + x1 ≥ 6 (as ≤ rows): the vertex (1.6, 1.2) costs 2.8, and the
    # duals (0.4, 0.2) price the rows: ∂cost/∂b_ub = (−0.4, −0.2).
    a = np.array([[-1.0, -2.0], [-3.0, -1.0]])
    got = lp.minimize(np.array([1.0, 1.0]), (_triplets(a), np.array([-4.0, -6.0])))
    assert got is not None
    assert got.cost == pytest.approx(2.8)
    assert got.x.tolist() == pytest.approx([1.6, 1.2])
    assert got.upper_duals.tolist() == pytest.approx([-0.4, -0.2])


def test_equality_rows_and_repeated_coordinates() -> None:
    # x0 + x1 = 3 written as two halves of each coefficient (coordinates repeat and add up); x0 ≤ 1; min 2·x0 + 3·x1
    # puts x0 at its limit: 2 + 6.
    upper = lp.Triplets(np.array([0]), np.array([0]), np.array([1.0]), (1, 2))
    equal = lp.Triplets(np.array([0, 0, 0, 0]), np.array([0, 1, 0, 1]), np.array([0.5, 0.5, 0.5, 0.5]), (1, 2))
    got = lp.minimize(np.array([2.0, 3.0]), (upper, np.array([1.0])), (equal, np.array([3.0])))
    assert got is not None
    assert got.cost == pytest.approx(8.0)
    assert got.x.tolist() == pytest.approx([1.0, 2.0])


def test_infeasible_and_unbounded_lps_have_no_optimum() -> None:
    # x ≤ −1 with x ≥ 0; then min −x with x unconstrained above.
    one = lp.Triplets(np.array([0]), np.array([0]), np.array([1.0]), (1, 1))
    assert lp.minimize(np.array([1.0]), (one, np.array([-1.0]))) is None
    assert lp.minimize(np.array([-1.0]), (one, np.array([np.inf]))) is None


def test_a_block_of_the_wrong_width_is_refused() -> None:
    narrow = lp.Triplets(np.array([0]), np.array([0]), np.array([1.0]), (1, 1))
    with pytest.raises(ValueError, match="1 columns for 2 variables"):
        lp.minimize(np.array([1.0, 1.0]), (narrow, np.array([1.0])))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 3), st.booleans(), st.integers(0, 2**32 - 1))
def test_the_optimum_is_scipys(n_ub: int, n_var: int, n_eq: int, presolve: bool, seed: int) -> None:
    # Random LPs of the optimizer's shapes (covering rows with nonnegative data, some equality rows, sparse), about
    # half of them infeasible or unbounded: the same verdict and optimum as scipy's linprog (HiGHS too), and the
    # duals of the ≤ rows prove it (strong duality: with x ≥ 0 and no equality rows, cost = b_ub·duals).
    rng = np.random.default_rng(seed)
    sign = rng.choice(np.array([-1.0, 1.0]), size=(n_ub, 1))
    a_ub = np.where(rng.random((n_ub, n_var)) < 0.6, sign * rng.integers(0, 5, size=(n_ub, n_var)), 0.0)
    b_ub = sign[:, 0] * rng.integers(0, 10, size=n_ub)
    a_eq = np.where(rng.random((n_eq, n_var)) < 0.6, rng.integers(0, 3, size=(n_eq, n_var)), 0.0).astype(np.float64)
    b_eq = rng.integers(0, 6, size=n_eq).astype(np.float64)
    cost = rng.integers(-1, 6, size=n_var).astype(np.float64)
    equal = (_triplets(a_eq), b_eq) if n_eq else None
    got = lp.minimize(cost, (_triplets(a_ub), b_ub.astype(np.float64)), equal, presolve=presolve)
    want = optimize.linprog(
        cost,
        A_ub=a_ub,
        b_ub=b_ub,
        A_eq=a_eq if n_eq else None,
        b_eq=b_eq if n_eq else None,
        bounds=(0, None),
        method="highs",
        options={"presolve": presolve},
    )
    assert (got is not None) == (want.status == 0)
    if got is None:
        return
    assert got.cost == pytest.approx(want.fun, rel=1e-9, abs=1e-9)
    assert np.all(a_ub @ got.x <= b_ub + 1e-7)
    assert np.all(got.x >= -1e-9)
    assert np.all(got.upper_duals <= 1e-9)
    if not n_eq:
        assert float(b_ub @ got.upper_duals) == pytest.approx(got.cost, rel=1e-7, abs=1e-7)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(0, 30), st.integers(0, 2**32 - 1))
def test_columnwise_arrays_are_scipys_csc(n_row: int, n_col: int, n_nz: int, seed: int) -> None:
    # Repeated coordinates (summed), entries that cancel to zero (dropped), empty columns.
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n_row, size=n_nz)
    cols = rng.integers(0, n_col, size=n_nz)
    vals = rng.choice(np.array([-1.0, 1.0, 2.0]), size=n_nz)
    start, index, value = lp._columnwise(rows, cols, vals, n_col=n_col)
    want = sparse.coo_matrix((vals, (rows, cols)), shape=(n_row, n_col)).tocsc()
    want.sum_duplicates()
    want.eliminate_zeros()
    assert start.tolist() == want.indptr.tolist()
    assert index.tolist() == want.indices.tolist()
    assert value.tolist() == want.data.tolist()


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.floats(0.0, 0.4), st.integers(0, 2**32 - 1))
def test_components_are_scipys_connected_components(n_cls: int, n_col: int, density: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pair_c, pair_k = np.nonzero(rng.random((n_cls, n_col)) < density)
    got = bound.components(pair_c, pair_k, n_cls=n_cls, n_col=n_col)
    graph = sparse.coo_matrix((np.ones(len(pair_c)), (pair_c, n_cls + pair_k)), shape=(n_cls + n_col, n_cls + n_col))
    _, want = csgraph.connected_components(graph, directed=False)
    want = want[:n_cls]
    # The same partition of the classes, each labelled by its smallest class.
    assert [set(np.flatnonzero(got == v)) for v in np.unique(got)] == [
        set(np.flatnonzero(want == v)) for v in np.unique(want)
    ]
    assert all(got[c] == np.flatnonzero(got == got[c])[0] for c in range(n_cls))


def test_the_public_highs_class_still_prints_its_banner_when_built() -> None:
    """Why `lp` builds highspy's private `_core._Highs`: when this fails, an upgrade made `highspy.Highs()` quiet (or
    gave it a way to be), and `lp` should use the public class."""
    script = "import highspy\nhighspy.Highs()\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Running HiGHS ")


def test_a_provisioning_solve_imports_highspy_not_scipy_and_prints_nothing() -> None:
    # A fresh interpreter (this one has scipy from the tests above): the provisioner's solve (no lower bound) runs
    # the repack's LPs; scipy must stay out (it was ~50 MB of the controller's RSS) and HiGHS must not write its
    # banner or log to stdout, which the controller's logs share.
    script = textwrap.dedent(
        """
        import sys
        from tests.scheduling import conftest
        pods = conftest.make_pods(12, cpu="3", memory="1Gi") + conftest.make_pods(7, "q", cpu="1", memory="6Gi")
        result = conftest.solve(pods, compute_lower_bound=False)
        assert result.new_nodeclaims, result
        sys.stderr.write(",".join(sorted(m for m in ("scipy", "highspy") if m in sys.modules)))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == "highspy"
