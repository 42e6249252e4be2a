"""The lower bound of solves with more classes than the pattern LP takes (`relaxation`): merged classes keep counting
whole pods per node, and the bound stays below every plan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels
from karpy.cloudprovider import types
from karpy.scheduling.optimizer import bound, relaxation


@pytest.mark.parametrize(
    ("values", "bits", "expected"),
    [
        ([1500, 1024, 0], 6, [1472, 1024, 0]),
        ([1500, 1023, 1], 1, [1024, 512, 1]),
        ([1500, 7], 11, [1500, 7]),  # as many bits as the value has: exact
        ([-3, 5], 1, [-3, 4]),  # not positive: kept
    ],
)
def test_round_down_keeps_the_most_significant_bits(values: list[int], bits: int, expected: list[int]) -> None:
    got = relaxation.round_down(np.array([values], dtype=np.int64), bits=bits)
    assert got.tolist() == [expected]


def test_merge_is_exact_while_it_can_be() -> None:
    # Two classes of one shape and one row become one; the third has another row, so it stays apart.
    vectors = np.array([[1, 2], [1, 2], [1, 2]], dtype=np.int64)
    compat = np.array([[True, False], [True, False], [False, True]])
    got = relaxation.merge(vectors, np.array([3, 4, 5]), compat, limit=2)
    assert got is not None
    assert sorted(got.sizes.tolist()) == [5, 7]
    assert sorted(map(tuple, got.compat.tolist())) == [(False, True), (True, False)]


def test_merge_unites_rows_then_rounds_shapes() -> None:
    vectors = np.array([[1500, 1], [1500, 1], [1400, 1]], dtype=np.int64)
    compat = np.array([[True, False], [False, True], [False, True]])
    by_shape = relaxation.merge(vectors, np.array([1, 2, 3]), compat, limit=2)
    assert by_shape is not None  # one class per shape, using either class's columns
    assert sorted(zip(by_shape.vectors[:, 0].tolist(), by_shape.sizes.tolist(), strict=True)) == [(1400, 3), (1500, 3)]
    assert by_shape.compat[by_shape.vectors[:, 0] == 1500].tolist() == [[True, True]]
    rounded = relaxation.merge(vectors, np.array([1, 2, 3]), compat, limit=1)
    assert rounded is not None  # 1500 and 1400 agree on their 4 leading bits (1280)
    assert rounded.vectors.tolist() == [[1280, 1]]
    assert rounded.sizes.tolist() == [6]
    assert rounded.compat.tolist() == [[True, True]]
    assert relaxation.merge(vectors, np.array([1, 2, 3]), compat, limit=0) is None


def test_distinct_columns_drop_exact_copies_only() -> None:
    compat = np.array([[True, True, True, False], [False, False, False, True]])
    capacity = np.array([[4.0, 8.0], [4.0, 8.0], [4.0, 9.0], [4.0, 8.0]])
    price = np.array([1.0, 1.0, 1.0, 1.0])
    assert relaxation.distinct_columns(compat, capacity, price).tolist() == [0, 2, 3]


def _one_pod_per_node_catalog() -> list[types.InstanceType]:
    # 10 cpu for $1: two 6-cpu pods never share a node, while the per-resource LP packs 10/6 of them in one.
    return [scheduling_conftest.make_instance_type("ten", cpu=10, memory_gib=64, price=1.0)]


def test_many_shapes_still_count_whole_pods_per_node() -> None:
    # 70 distinct memory requests make 70 classes, more than the pattern LP takes: rounded down to fewer bits they
    # merge, and the pattern LP still sees one 6-cpu pod per node: $70, where the per-resource LP says $42.
    ps = [builders.parsed_pod(f"p-{i}", cpu="6", memory=f"{1024 + 16 * i}Mi", created=float(i)) for i in range(70)]
    res = scheduling_conftest.solve(ps, catalog=_one_pod_per_node_catalog())
    assert len({p.requests[labels.RESOURCE_MEMORY] for p in ps}) > bound.MERGED_CLASSES
    assert res.cost_per_hour == pytest.approx(70.0)
    assert res.lp_bound_per_hour == pytest.approx(70.0, rel=1e-6)
    assert res.lower_bound_per_hour == pytest.approx(70.0, rel=1e-6)


def test_zone_pinned_classes_merge_across_zones() -> None:
    # 22 shapes pinned to each of 3 zones: 66 classes. One class per shape (its pods may use any zone's nodes)
    # still needs a node per pod: $66, where the per-resource LP says 0.6 x 66 = $39.6.
    ps = []
    for z, zone in enumerate(scheduling_conftest.ZONES):
        for i in range(22):
            pinned = {labels.LABEL_ZONE: zone}
            ps.append(builders.parsed_pod(f"p-{z}-{i}", cpu="6", memory=f"{1024 + 64 * i}Mi", nodeSelector=pinned))
    res = scheduling_conftest.solve(ps, catalog=_one_pod_per_node_catalog())
    assert len({p.requests[labels.RESOURCE_MEMORY] for p in ps}) <= bound.MERGED_CLASSES < len(ps)
    assert res.cost_per_hour == pytest.approx(66.0)
    assert res.lp_bound_per_hour == pytest.approx(66.0, rel=1e-6)


shapes = st.lists(
    st.tuples(
        st.integers(1, 40).map(lambda n: f"{100 * n}m"),
        st.integers(1, 48).map(lambda n: f"{128 * n}Mi"),
        st.sampled_from((None, *scheduling_conftest.ZONES)),
    ),
    min_size=3,
    max_size=12,
    unique_by=lambda shape: shape[:2],
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes, st.integers(1, 3), st.sampled_from(("fake", "small")))
def test_bound_of_many_classes_never_exceeds_the_plan_cost(
    drawn: list[tuple[str, str, str | None]], limit: int, kind: str
) -> None:
    # Distinct requests, each its own class, more than the pattern LP is allowed here (the same path as a large
    # solve's, at a size a brute force could check): every draw merges its classes, by zone and by rounding.
    ps = [
        builders.parsed_pod(
            f"p-{i}",
            cpu=cpu,
            memory=mem,
            created=float(i),
            **({"nodeSelector": {labels.LABEL_ZONE: zone}} if zone else {}),
        )
        for i, (cpu, mem, zone) in enumerate(drawn)
    ]
    its = scheduling_conftest.fake_catalog(16) if kind == "fake" else _small_nodes_catalog()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bound, "MERGED_CLASSES", limit)
        res = scheduling_conftest.solve(ps, catalog=its)
    assert not res.unschedulable
    assert 0 < res.lp_bound_per_hour <= res.lower_bound_per_hour <= res.cost_per_hour * (1 + 1e-9)


def _small_nodes_catalog() -> list[types.InstanceType]:
    """Nodes holding a few pods each (where whole pods per node count) and a large one, at different prices per
    unit."""
    return [
        scheduling_conftest.make_instance_type("s-1", cpu=2, memory_gib=4, pods_=4, price=0.09),
        scheduling_conftest.make_instance_type("s-2", cpu=4, memory_gib=8, pods_=8, price=0.17),
        scheduling_conftest.make_instance_type("r-1", cpu=2, memory_gib=16, pods_=4, price=0.13),
        scheduling_conftest.make_instance_type("l-1", cpu=32, memory_gib=64, price=1.6),
    ]
