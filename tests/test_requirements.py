"""Requirements algebra: table tests of each operator and Hypothesis laws of intersection and compatibility."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles

from karpy import requirements
from karpy.api import labels, meta

Op = meta.Operator
R = requirements.Requirement
Rs = requirements.Requirements

# A universe of probe values: plain words, integers, a zero-padded integer and a negative one.
UNIVERSE = ("a", "b", "c", "0", "1", "2", "3", "5", "05", "-1", "10")
ABSENT = None


def outcomes(req: requirements.Requirement) -> frozenset[str | None]:
    """The requirement's set restricted to the probe universe (None stands for 'label absent')."""
    out: set[str | None] = {v for v in UNIVERSE if req.has(v)}
    if req.absent:
        out.add(ABSENT)
    return frozenset(out)


# --- table tests ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("operator", "values", "allowed", "refused", "absent_ok"),
    [
        (Op.IN, ("a", "b"), ("a", "b"), ("c", "1"), False),
        (Op.NOT_IN, ("a",), ("b", "1"), ("a",), True),
        (Op.EXISTS, (), ("a", "1"), (), False),
        (Op.DOES_NOT_EXIST, (), (), ("a", "1"), True),
        (Op.GT, ("2",), ("3", "10", "05"), ("2", "1", "a"), False),
        (Op.LT, ("2",), ("1", "0", "-1"), ("2", "3", "a"), False),
        (Op.GTE, ("2",), ("2", "3"), ("1", "a"), False),
        (Op.LTE, ("2",), ("2", "1"), ("3", "a"), False),
    ],
)
def test_operator_semantics(
    operator: meta.Operator,
    values: tuple[str, ...],
    allowed: tuple[str, ...],
    refused: tuple[str, ...],
    absent_ok: bool,
) -> None:
    req = R.new("k", operator, values=values)
    assert all(req.has(v) for v in allowed)
    assert not any(req.has(v) for v in refused)
    assert req.absent is absent_ok
    assert Rs([req]).admits({}) is absent_ok


def test_beta_labels_are_normalized() -> None:
    req = R.new("failure-domain.beta.kubernetes.io/zone", Op.IN, values=("z1",))
    assert req.key == labels.LABEL_ZONE
    assert Rs.from_labels({"beta.kubernetes.io/arch": "arm64"}).get(labels.LABEL_ARCH) is not None


@pytest.mark.parametrize("bad", [("x",), ("1", "2"), (), ("1.5",)])
def test_bound_operators_need_one_integer(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="needs exactly one integer"):
        R.new("k", Op.GT, values=bad)


@pytest.mark.parametrize(
    ("left", "right", "expect_empty"),
    [
        (R.new("k", Op.IN, values=("a", "b")), R.new("k", Op.NOT_IN, values=("a",)), False),
        (R.new("k", Op.IN, values=("a",)), R.new("k", Op.NOT_IN, values=("a",)), True),
        (R.new("k", Op.GT, values=("5",)), R.new("k", Op.LT, values=("6",)), True),
        (R.new("k", Op.GT, values=("5",)), R.new("k", Op.LT, values=("7",)), False),
        (R.new("k", Op.EXISTS), R.new("k", Op.DOES_NOT_EXIST), True),
        (R.new("k", Op.NOT_IN, values=("a",)), R.new("k", Op.DOES_NOT_EXIST), False),
        (R.new("k", Op.IN, values=("3", "x")), R.new("k", Op.GT, values=("2",)), False),
        (R.new("k", Op.IN, values=("1", "x")), R.new("k", Op.GT, values=("2",)), True),
    ],
)
def test_intersection_emptiness(left: R, right: R, expect_empty: bool) -> None:
    assert left.intersection(right).is_empty() is expect_empty
    assert (Rs([left]).compatible(Rs([right])) is not None) is expect_empty


def test_in_intersected_with_gt_keeps_only_integers_in_range() -> None:
    req = R.new("k", Op.IN, values=("1", "3", "x")).intersection(R.new("k", Op.GT, values=("2",)))
    assert req.values() == frozenset({"3"})
    assert req.operator() is Op.IN


def test_min_values_takes_the_larger_floor() -> None:
    a = R.new("k", Op.EXISTS, min_values=2)
    b = R.new("k", Op.IN, values=("x", "y", "z"), min_values=3)
    assert a.intersection(b).min_values == 3
    assert Rs([a]).has_min_values()


def test_undefined_custom_label_is_refused_unless_absence_is_tolerated() -> None:
    pool = Rs([R.new(labels.LABEL_ARCH, Op.IN, values=("amd64",))])
    reason = pool.compatible(Rs([R.new("team", Op.IN, values=("a",))]))
    assert reason is not None
    assert 'label "team" does not have known values' in reason
    assert pool.compatible(Rs([R.new("team", Op.NOT_IN, values=("a",))])) is None
    assert pool.compatible(Rs([R.new("team", Op.DOES_NOT_EXIST)])) is None


def test_undefined_well_known_label_is_allowed_only_when_asked() -> None:
    pool = Rs([R.new(labels.LABEL_ARCH, Op.IN, values=("amd64",))])
    zonal = Rs([R.new(labels.LABEL_ZONE, Op.IN, values=("z1",))])
    assert pool.compatible(zonal) is not None
    assert pool.compatible(zonal, allow_undefined=requirements.ALLOW_UNDEFINED_WELL_KNOWN) is None


def test_incompatible_reason_names_key_and_both_sides() -> None:
    pool = Rs([R.new(labels.LABEL_ARCH, Op.IN, values=("amd64",))])
    reason = pool.compatible(Rs([R.new(labels.LABEL_ARCH, Op.IN, values=("arm64",))]))
    assert reason == "key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in kubernetes.io/arch In [amd64]"


def test_typo_hint_for_unknown_label() -> None:
    reason = Rs().compatible(Rs([R.new("zone", Op.IN, values=("z",))]), allow_undefined=frozenset({labels.LABEL_ZONE}))
    assert reason is not None
    assert "typo of" in reason


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (R.new("k", Op.IN, values=("b", "a")), "a"),
        (R.new("k", Op.GT, values=("4",)), "5"),
        (R.new("k", Op.LT, values=("4",)), "3"),
        (R.new("k", Op.GT, values=("4",)).intersection(R.new("k", Op.NOT_IN, values=("5", "6"))), "7"),
        (R.new("k", Op.GT, values=("4",)).intersection(R.new("k", Op.LT, values=("6",))), "5"),
        (
            R.new("k", Op.GT, values=("4",))
            .intersection(R.new("k", Op.LT, values=("6",)))
            .intersection(R.new("k", Op.NOT_IN, values=("5",))),
            "05",
        ),
        (R.new("k", Op.EXISTS), None),
        (R.new("k", Op.DOES_NOT_EXIST), None),
    ],
)
def test_any_is_a_deterministic_member(req: R, expected: str | None) -> None:
    assert req.any() == expected
    if expected is not None:
        assert req.has(expected)


def test_requirements_merge_same_key_and_render_single_labels() -> None:
    reqs = Rs.from_node_selector(
        [
            meta.NodeSelectorRequirement(labels.LABEL_ZONE, Op.IN, ("z1", "z2")),
            meta.NodeSelectorRequirement(labels.LABEL_ZONE, Op.NOT_IN, ("z2",)),
            meta.NodeSelectorRequirement(labels.LABEL_CAPACITY_TYPE, Op.EXISTS),
        ]
    )
    assert len(reqs) == 2
    assert reqs.single_labels() == {labels.LABEL_ZONE: "z1"}
    assert reqs.admits({labels.LABEL_ZONE: "z1", labels.LABEL_CAPACITY_TYPE: "spot"})
    assert not reqs.admits({labels.LABEL_ZONE: "z1"})
    assert hash(reqs) == hash(Rs(list(reqs.values())))


# --- Hypothesis laws --------------------------------------------------------------------------------------------
VALUE = st.sampled_from(UNIVERSE)


@st.composite
def requirement(draw: st.DrawFn) -> R:
    op = draw(st.sampled_from(list(Op)))
    if op in (Op.GT, Op.LT, Op.GTE, Op.LTE):
        values: tuple[str, ...] = (str(draw(st.integers(-2, 11))),)
    elif op in (Op.IN, Op.NOT_IN):
        values = tuple(draw(st.sets(VALUE, min_size=1, max_size=4)))
    else:
        values = ()
    min_values = draw(st.none() | st.integers(1, 3))
    return R.new("k", op, values=values, min_values=min_values)


@given(requirement(), requirement())
def test_intersection_is_commutative(a: R, b: R) -> None:
    assert a.intersection(b) == b.intersection(a)


@given(requirement(), requirement(), requirement())
def test_intersection_is_associative(a: R, b: R, c: R) -> None:
    left, right = a.intersection(b).intersection(c), a.intersection(b.intersection(c))
    assert outcomes(left) == outcomes(right)
    assert left.is_empty() == right.is_empty()
    assert left.min_values == right.min_values


@given(requirement())
def test_intersection_is_idempotent(a: R) -> None:
    assert outcomes(a.intersection(a)) == outcomes(a)
    assert a.intersection(a).is_empty() == a.is_empty()


@given(requirement(), requirement(), VALUE)
def test_has_of_intersection_is_has_in_both(a: R, b: R, value: str) -> None:
    both = a.intersection(b)
    assert both.has(value) == (a.has(value) and b.has(value))
    assert both.absent == (a.absent and b.absent)


@given(requirement(), requirement())
def test_compatible_iff_intersection_nonempty(a: R, b: R) -> None:
    compatible = Rs([a]).compatible(Rs([b])) is None
    assert compatible == (not a.intersection(b).is_empty())


@given(requirement())
def test_nonempty_requirements_have_a_witness(a: R) -> None:
    if a.is_empty():
        assert not a.absent
        assert not any(a.has(v) for v in UNIVERSE)
        return
    witness = a.any()
    if witness is not None:
        assert a.has(witness)
    else:
        # Unconstrained complement or absence-only: some fresh string or absence satisfies it.
        assert a.absent or a.has("a-fresh-value")


@given(requirement())
def test_node_selector_round_trip_preserves_the_set(a: R) -> None:
    back = Rs.from_node_selector(a.to_node_selector()).get("k")
    assert back is not None
    assert outcomes(back) == outcomes(a)
    assert back.is_empty() == a.is_empty()


@settings(max_examples=hypothesis_profiles.examples(50))
@given(st.lists(requirement(), max_size=3), st.dictionaries(st.sampled_from(("k",)), VALUE, max_size=1))
def test_admits_agrees_with_has_and_absence(reqs: list[R], node_labels: dict[str, str]) -> None:
    combined = Rs(reqs)
    expected = all(r.has(node_labels["k"]) if "k" in node_labels else r.absent for r in reqs)
    assert combined.admits(node_labels) == expected
