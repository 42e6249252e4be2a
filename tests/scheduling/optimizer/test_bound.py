"""The LP lower bound: optima known by hand, and never above the cost of a feasible plan (Hypothesis)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels
from karpy.cloudprovider import types
from karpy.scheduling.optimizer import bound, patterns, relaxation


def _lp(demand: list[list[float]], compat: list[list[bool]], capacity: list[list[float]], price: list[float]) -> float:
    got = bound.solve_lp(
        np.array(demand, dtype=np.float64),
        np.array(compat, dtype=np.bool_),
        np.array(capacity, dtype=np.float64),
        np.array(price, dtype=np.float64),
    )
    assert got is not None
    return got.cost


def test_one_resource_two_types_buys_the_cheaper_per_unit() -> None:
    # 10 units of demand; type A: 4 units for $1 (0.25/unit), type B: 10 units for $3 (0.3/unit) -> 2.5 A = $2.5.
    assert _lp([[10.0]], [[True, True]], [[4.0], [10.0]], [1.0, 3.0]) == pytest.approx(2.5)


def test_two_resources_mix_a_cpu_rich_and_a_memory_rich_type() -> None:
    # Two pod classes: CPU-heavy (8 cpu, 2 mem in total) and memory-heavy (2 cpu, 8 mem).
    # C: 4 cpu / 1 mem for $1, M: 1 cpu / 4 mem for $1. Buying 2 C + 2 M covers (10, 10) exactly: $4.
    # Either type alone needs 10/... e.g. C alone needs 10 mem / 1 -> 10 nodes: the LP must mix.
    cost = _lp([[8.0, 2.0], [2.0, 8.0]], [[True, True], [True, True]], [[4.0, 1.0], [1.0, 4.0]], [1.0, 1.0])
    assert cost == pytest.approx(4.0)


def test_a_class_may_only_use_its_compatible_types() -> None:
    # The cheap type is off limits for the only class: the bound pays the dear one.
    assert _lp([[4.0]], [[False, True]], [[4.0], [4.0]], [1.0, 5.0]) == pytest.approx(5.0)


def test_dominated_columns_are_dropped_but_ties_keep_one() -> None:
    compat = np.ones((1, 5), dtype=np.bool_)
    capacity = np.array([[4.0, 8.0], [8.0, 16.0], [8.0, 16.0], [1.0, 100.0], [16.0, 32.0]])
    price = np.array([1.0, 1.5, 1.5, 1.0, 3.0])
    keep = bound.undominated(compat, capacity, price)
    # 1, 2 and 4 give more of both per dollar than 0 and tie with each other (the dearest, 4, is kept: larger nodes
    # round better); 3 is memory-rich and beaten by none.
    assert keep.tolist() == [False, False, False, True, True]
    # Equal columns at equal prices: the lowest index stays.
    assert bound.undominated(np.ones((1, 2), np.bool_), capacity[[1, 2]], price[[1, 2]]).tolist() == [True, False]


def _reference_undominated(
    compat: npt.NDArray[np.bool_], capacity: npt.NDArray[np.float64], price: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """The dominance filter as first written: every pair compared densely (same tolerance, tie-break and leaders)."""
    n = len(price)
    rank = np.lexsort((-np.arange(n), price))
    order = np.empty(n, dtype=np.int64)
    order[rank] = np.arange(n)
    per_unit = capacity / np.maximum(price, 1e-300)[:, None]
    grow = 1 + 1e-9

    def superset(inner: npt.NDArray[np.bool_], outer: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return np.asarray(~(inner[:, :, None] & ~outer[:, None, :]).any(axis=0))

    def beaten(rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        ok = np.ones((len(rows), len(cols)), dtype=np.bool_)
        back = np.ones_like(ok)
        for r in range(capacity.shape[1]):
            lhs = price[cols][None, :] * capacity[rows, r][:, None]
            rhs = price[rows][:, None] * capacity[cols, r][None, :]
            ok &= lhs <= rhs * grow
            back &= rhs <= lhs * grow
        ok &= superset(compat[:, rows], compat[:, cols])
        back &= superset(compat[:, cols], compat[:, rows]).T
        mutual = ok & back
        out = (ok & ~mutual) | (mutual & (order[cols][None, :] > order[rows][:, None]))
        return np.asarray((out & (rows[:, None] != cols[None, :])).any(axis=1))

    kinds = {tuple(col): i for i, col in enumerate(sorted({tuple(col) for col in compat.T.tolist()}))}
    kind = np.array([kinds[tuple(col)] for col in compat.T.tolist()], dtype=np.int64)
    alive = np.arange(n)
    if n > 4 * patterns._LEADERS:
        leaders = []
        for r in range(capacity.shape[1]):
            ranked = np.lexsort((-per_unit[:, r], kind))
            first = np.searchsorted(kind[ranked], kind[ranked], side="left")
            leaders.append(ranked[np.arange(n) - first < patterns._LEADERS // 4])
        alive = np.flatnonzero(~beaten(alive, np.unique(np.concatenate(leaders))))
    keep = np.zeros(n, dtype=np.bool_)
    keep[alive[~beaten(alive, alive)]] = True
    return keep


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 6),  # classes
    st.integers(1, 300),  # columns (above 4 × _LEADERS the leaders pass runs first)
    st.integers(1, 3),  # resources
    st.integers(0, 2**32 - 1),
)
def test_undominated_equals_the_dense_pairwise_filter(n_cls: int, n_col: int, n_res: int, seed: int) -> None:
    # Small integer capacities and few prices: many exact ties (both ways) and shared class sets.
    rng = np.random.default_rng(seed)
    compat = rng.random((n_cls, n_col)) < 0.7
    capacity = rng.integers(1, 5, size=(n_col, n_res)).astype(np.float64)
    price = rng.choice(np.array([0.5, 1.0, 1.5, 2.0]), size=n_col)
    expected = _reference_undominated(compat, capacity, price)
    assert patterns.undominated(compat, capacity, price).tolist() == expected.tolist()


def test_a_class_without_any_usable_type_has_no_solution() -> None:
    got = bound.solve_lp(np.array([[1.0]]), np.array([[False]]), np.array([[4.0]]), np.array([1.0]))
    assert got is None


def test_bound_of_a_solve_with_known_optimum() -> None:
    # 10 pods × 1 cpu on the fake catalog (price 0.3 per cpu step, 110 pods each): fake-it-9 has 10 cpu, so the
    # fractional optimum is exactly one fake-it-9 node.
    res = scheduling_conftest.solve(scheduling_conftest.make_pods(10, memory="1Gi"))
    assert res.lower_bound_per_hour == pytest.approx(0.3 * 10)
    assert res.cost_per_hour == pytest.approx(res.lower_bound_per_hour)


def test_bound_of_one_pod_is_its_cheapest_node() -> None:
    # One 500m pod on the fake catalog: every node holds at most one pod of this solve, so the bound counts whole
    # nodes — the cheapest type that fits it (fake-it-0, $0.3) — where the per-resource LP would buy half of one.
    res = scheduling_conftest.solve([builders.parsed_pod("one", cpu="500m", memory="1Gi")])
    assert res.lower_bound_per_hour == pytest.approx(0.3)
    assert res.cost_per_hour == pytest.approx(0.3)


def test_bound_respects_offering_requirements() -> None:
    # Spot is 30% cheaper in the helper catalog; an on-demand-only pool must be bounded at on-demand prices.
    its = [
        scheduling_conftest.make_instance_type(
            "big", cpu=8, memory_gib=32, capacity_types=(labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND)
        )
    ]
    od = builders.parsed_nodepool(
        requirements=[builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", labels.CAPACITY_TYPE_ON_DEMAND)]
    )
    res = scheduling_conftest.solve(scheduling_conftest.make_pods(4, cpu="2", memory="1Gi"), pools=[od], catalog=its)
    on_demand = 0.1 * 8 + 0.1 * 32
    assert res.lower_bound_per_hour == pytest.approx(on_demand)  # exactly one node's worth of cpu
    assert res.cost_per_hour == pytest.approx(on_demand)


workload = st.lists(
    st.tuples(st.sampled_from(("100m", "250m", "1", "1500m", "3")), st.sampled_from(("100Mi", "1Gi", "4Gi", "9Gi"))),
    min_size=1,
    max_size=40,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload, st.sampled_from(("fake", "mixed")))
def test_bound_never_exceeds_the_plan_cost(shapes: list[tuple[str, str]], kind: str) -> None:
    ps = [builders.parsed_pod(f"p-{i}", cpu=cpu, memory=mem, created=float(i)) for i, (cpu, mem) in enumerate(shapes)]
    its = scheduling_conftest.fake_catalog(16) if kind == "fake" else _mixed_catalog()
    res = scheduling_conftest.solve(ps, catalog=its)
    assert not res.unschedulable
    assert res.lower_bound_per_hour > 0
    assert res.lower_bound_per_hour <= res.cost_per_hour * (1 + 1e-9)


constrained = st.lists(
    st.tuples(
        st.sampled_from(("generic", "host-anti", "host-spread", "host-spread-2", "zone-spread", "zone-pinned")),
        st.sampled_from(("100m", "500m", "1500m", "3")),
        st.sampled_from(("256Mi", "2Gi", "6Gi")),
        st.integers(1, 10),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained, st.sampled_from(("fake", "mixed")), st.booleans())
def test_tightened_bound_never_exceeds_the_plan_cost(
    groups: list[tuple[str, str, str, int]], kind: str, shared_app: bool
) -> None:
    # Hostname anti-affinity and spread make exclusion groups (bound.py): the tightened bound must stay below
    # every feasible plan, here the solver's own, and never below the LP it tightens.
    ps = []
    for g, (rule, cpu, mem, count) in enumerate(groups):
        app = "shared" if shared_app else f"app{g}"
        ps += scheduling_conftest.make_pods(
            count,
            prefix=f"g{g}",
            cpu=cpu,
            memory=mem,
            labels={"app": app},
            **scheduling_conftest.workload_spec(rule, app),
        )
    res = scheduling_conftest.solve(
        ps, catalog=scheduling_conftest.fake_catalog(16) if kind == "fake" else _mixed_catalog()
    )
    assert not res.unschedulable
    assert 0 < res.lp_bound_per_hour <= res.lower_bound_per_hour <= res.cost_per_hour * (1 + 1e-9)


@pytest.mark.parametrize(
    ("rule", "count", "lp", "tightened"),
    [
        # Anti-affine half-cpu pods: one small node holds all four, so the LP (its patterns count whole pods) is $1,
        # but no two pods share a node and the cheapest node holding one is small: every plan costs 4 x $1.
        ("host-anti", 4, 1.0, 4.0),
        # maxSkew 2 on hostname: a new node holds at most two of the six pods, so at least three nodes (the LP: one
        # and a half small nodes' worth of pods).
        ("host-spread-2", 6, 1.5, 3.0),
    ],
)
def test_hostname_rules_bound_at_the_nodes_they_force(rule: str, count: int, lp: float, tightened: float) -> None:
    its = [
        scheduling_conftest.make_instance_type("small", cpu=2, memory_gib=4, price=1.0),
        scheduling_conftest.make_instance_type("big", cpu=16, memory_gib=32, price=4.0),
    ]
    spec = scheduling_conftest.workload_spec(rule, "db")
    res = scheduling_conftest.solve(
        scheduling_conftest.make_pods(count, cpu="500m", memory="512Mi", labels={"app": "db"}, **spec), catalog=its
    )
    assert res.lp_bound_per_hour == pytest.approx(lp, rel=1e-6)
    assert res.lower_bound_per_hour == pytest.approx(tightened, rel=1e-6)
    assert res.cost_per_hour == pytest.approx(tightened)


def test_zone_pinned_parts_each_buy_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    # Zone spread over three zones puts one pod in each; nodes in different zones are never shared, so each pod
    # buys a small node of its own ($3). The per-resource LP (what the bound falls back to when no merge of
    # classes gets down to `MERGED_CLASSES`, here none) sees three quarter-full small nodes' worth of cpu ($0.75).
    monkeypatch.setattr(bound, "MERGED_CLASSES", 0)
    its = [
        scheduling_conftest.make_instance_type("small", cpu=2, memory_gib=4, price=1.0),
        scheduling_conftest.make_instance_type("big", cpu=16, memory_gib=32, price=8.0),
    ]
    spec = scheduling_conftest.workload_spec("zone-spread", "web")
    res = scheduling_conftest.solve(
        scheduling_conftest.make_pods(3, cpu="500m", memory="512Mi", labels={"app": "web"}, **spec), catalog=its
    )
    assert res.lp_bound_per_hour == pytest.approx(0.75, rel=1e-6)
    assert res.lower_bound_per_hour == pytest.approx(3.0, rel=1e-6)
    assert res.cost_per_hour == pytest.approx(3.0)


def _mixed_catalog() -> list[types.InstanceType]:
    """CPU-rich, memory-rich and balanced families at different prices per unit, so the LP mixes types."""
    out = []
    for size in (1, 2, 4, 8, 16):
        out.append(
            scheduling_conftest.make_instance_type(f"c-{size}", cpu=2 * size, memory_gib=2 * size, price=0.08 * size)
        )
        out.append(scheduling_conftest.make_instance_type(f"r-{size}", cpu=size, memory_gib=8 * size, price=0.1 * size))
        out.append(
            scheduling_conftest.make_instance_type(f"m-{size}", cpu=2 * size, memory_gib=8 * size, price=0.15 * size)
        )
    return out


def test_pattern_bound_counts_whole_pods_per_node() -> None:
    # Two 6-cpu pods and a 10-cpu type at $1: the per-resource LP buys 1.2 nodes, but no node holds both pods, so
    # every plan buys two; the pattern LP (the type holds at most one pod: a small column) proves $2.
    req = np.array([[6000]], dtype=np.int64)
    got = patterns.solve(req, np.array([2]), np.ones((1, 1), np.bool_), np.array([[10000]]), np.array([1.0]))
    assert got is not None
    assert got.bound == pytest.approx(2.0)
    assert _lp([[12000.0]], [[True]], [[10000.0]], [1.0]) == pytest.approx(1.2)


def test_pattern_bound_mixes_shapes_on_small_nodes() -> None:
    # Pods of 3 and 2 cpu (and 1 pod slot each) on a 5-cpu, 2-pod type at $1: one of each fills a node exactly, so
    # 4 + 4 pods need exactly 4 nodes; a 3-cpu type at $0.5 taking one 3-cpu pod does no better ($0.5 per 3-cpu pod
    # vs $1 per pair); the per-resource LP would buy the cheap type's cpu for the 2-cpu pods as well ($3.33).
    req = np.array([[3000, 1000], [2000, 1000]], dtype=np.int64)
    cap = np.array([[5000, 2000], [3000, 2000]], dtype=np.int64)
    got = patterns.solve(req, np.array([4, 4]), np.ones((2, 2), np.bool_), cap, np.array([1.0, 0.5]))
    assert got is not None
    assert got.bound == pytest.approx(4.0)
    weak = _lp([[12000.0, 4000.0], [8000.0, 4000.0]], [[True, True], [True, True]], cap.tolist(), [1.0, 0.5])
    assert weak < 4.0 - 0.5


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4)), min_size=1, max_size=4),
    st.lists(
        st.tuples(st.integers(4, 12), st.integers(4, 12), st.integers(1, 5), st.integers(1, 9)), min_size=1, max_size=3
    ),
)
def test_pattern_bound_never_exceeds_the_integer_optimum(
    shapes: list[tuple[int, int, int]], kinds: list[tuple[int, int, int, int]]
) -> None:
    # Brute force over whole nodes: the cheapest multiset of nodes (each holding a feasible pattern) covering all pods.
    req = np.array([[cpu, mem] for cpu, mem, _ in shapes], dtype=np.int64)
    counts = np.array([n for _, _, n in shapes], dtype=np.int64)
    cap = np.array([[cpu, mem] for cpu, mem, _, _ in kinds], dtype=np.int64)
    slots = [p for _, _, p, _ in kinds]
    price = np.array([float(x) for *_, x in kinds])
    req3 = np.concatenate([req, np.ones((len(shapes), 1), np.int64)], axis=1)
    cap3 = np.concatenate([cap, np.array(slots, np.int64)[:, None]], axis=1)
    compat = np.ones((len(shapes), len(kinds)), np.bool_)
    got = patterns.solve(req3, counts, compat, cap3, price)
    fits_some = bool(np.all(np.any(np.all(req3[:, None, :] <= cap3[None, :, :], axis=2), axis=1)))
    if not fits_some:
        assert got is None
        return
    assert got is not None
    optimum = _integer_optimum(req3, counts, cap3, price)
    assert got.bound <= optimum * (1 + 1e-9)
    assert got.cost >= got.bound - 1e-9


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=3, unique=True),
    st.lists(
        st.tuples(st.integers(20, 60), st.integers(20, 60), st.integers(1, 4), st.integers(1, 9)),
        min_size=2,
        max_size=3,
    ),
    st.data(),
)
def test_merged_classes_bound_never_exceeds_the_integer_optimum(
    shapes: list[tuple[int, int]], kinds: list[tuple[int, int, int, int]], data: st.DataObject
) -> None:
    # Classes merged down to fewer than there are (relaxation.merge: across columns, then rounded down) keep the
    # pattern LP's bound below the cheapest plan of the classes as they were, each on its own columns. Classes
    # share shapes (one zone's and another's pods) so that merging them matters.
    n_cls = data.draw(st.integers(2, 4))
    shape_of = data.draw(st.lists(st.integers(0, len(shapes) - 1), min_size=n_cls, max_size=n_cls))
    req = np.array([[*shapes[s], 1] for s in shape_of], dtype=np.int64)
    counts = np.array(data.draw(st.lists(st.integers(1, 3), min_size=n_cls, max_size=n_cls)), dtype=np.int64)
    cap = np.array([[cpu, mem, slots] for cpu, mem, slots, _ in kinds], dtype=np.int64)
    price = np.array([float(x) for *_, x in kinds])
    rows = st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds))
    compat = np.array(data.draw(st.lists(rows, min_size=n_cls, max_size=n_cls)), dtype=np.bool_)
    compat &= (req[:, None, :] <= cap[None, :, :]).all(axis=2)
    if not compat.any(axis=1).all():
        return  # some class fits none of its columns: no plan to compare with
    limit = data.draw(st.integers(1, n_cls - 1))
    merged = relaxation.merge(req, counts, compat, limit=limit)
    if merged is None:
        return  # even one bit per resource leaves more shapes: the bound falls back to the per-resource LP
    assert len(merged.sizes) <= limit
    got = patterns.solve(merged.vectors, merged.sizes, merged.compat, cap, price)
    assert got is not None
    assert got.bound <= _integer_optimum(req, counts, cap, price, compat=compat) * (1 + 1e-9)


def _integer_optimum(
    req: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    price: npt.NDArray[np.float64],
    *,
    compat: npt.NDArray[np.bool_] | None = None,
) -> float:
    """Cheapest cover by whole nodes: memoised search over the remaining counts (a node takes a maximal-or-not
    pattern of the remaining pods of classes its type suits, `compat` classes × types, all by default; every
    feasible pattern is tried)."""
    import functools
    import itertools

    suits = compat if compat is not None else np.ones((len(counts), len(price)), dtype=np.bool_)

    @functools.cache
    def best(left: tuple[int, ...]) -> float:
        if not any(left):
            return 0.0
        out = float("inf")
        first = next(i for i, n in enumerate(left) if n)  # the first remaining class goes on this node
        for k in range(len(price)):
            if not suits[first, k]:
                continue
            for take in itertools.product(*(range(n + 1) if suits[c, k] else range(1) for c, n in enumerate(left))):
                if take[first] == 0:
                    continue
                if ((np.array(take) @ req) <= cap[k]).all():
                    rest = tuple(n - t for n, t in zip(left, take, strict=True))
                    out = min(out, float(price[k]) + best(rest))
        return out

    return best(tuple(int(n) for n in counts))
