"""NodeOverlays applied to instance types (`karpy.cloudprovider.overlay`): matching, price and price adjustment,
capacity, weight order and conflicts. The cases are upstream's (core: pkg/controllers/nodeoverlay/suite_test.go,
pkg/cloudprovider/types_test.go AdjustedPrice), as data: overlays in, conflicts and the resulting prices and
capacity out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests import builders

from karpy.api import errors, labels, nodeoverlay, parse, quantity
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import overlay, types
from karpy.cloudprovider.fake import generator

FUSE = "smarter-devices/fuse"
Z1, Z2, Z4 = "test-zone-1", "test-zone-2", "test-zone-4"


def _offer(zone: str, capacity_type: str, price: float) -> types.Offering:
    return types.Offering(zone=zone, capacity_type=capacity_type, price=price)


# upstream's fake catalogue: every type in zones 1 and 2, spot and on-demand, at 1.02 (zone 2 on-demand at 2.02)
def _catalog() -> list[types.InstanceType]:
    names = ("default-instance-type", "small-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type")
    offers = [_offer(Z1, "spot", 1.02), _offer(Z1, "on-demand", 1.02), _offer(Z2, "on-demand", 2.02)]
    return [generator.new_instance_type(name, offerings=offers) for name in names]


def _overlay(name: str, *requirements: Mapping[str, Any], **spec: Any) -> nodeoverlay.NodeOverlay:
    """Through the real parser, so that every case is an overlay the API server would store."""
    body = {"requirements": list(requirements), **spec}
    return parse.nodeoverlay(
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": body}
    )


def _req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


TYPE = labels.LABEL_INSTANCE_TYPE


@dataclass(frozen=True)
class Case:
    name: str
    overlays: Sequence[nodeoverlay.NodeOverlay]
    conflicting: frozenset[str] = frozenset()
    prices: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    """(type, zone, capacity type) → price after the overlays; offerings not named keep their list price."""
    capacity: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """type → extended resources added (milli); types not named get none."""


CASES = [
    Case("no overlay leaves every type alone", []),
    Case(
        "a price replaces the matching types' prices",
        [_overlay("a", _req(TYPE, "In", "default-instance-type"), price="13234.223")],
        prices={
            ("default-instance-type", z, c): 13234.223 for z, c in ((Z1, "spot"), (Z1, "on-demand"), (Z2, "on-demand"))
        },
    ),
    Case(
        "a price adjustment adds to the list price",
        [_overlay("a", _req(TYPE, "In", "default-instance-type"), priceAdjustment="+1000")],
        prices={("default-instance-type", Z1, "spot"): 1001.02, ("default-instance-type", Z2, "on-demand"): 1002.02},
    ),
    Case(
        "a percentage scales the list price",
        [_overlay("a", _req(TYPE, "In", "small-instance-type"), priceAdjustment="-50%")],
        prices={("small-instance-type", Z1, "spot"): 0.51, ("small-instance-type", Z2, "on-demand"): 1.01},
    ),
    Case(
        "a price never goes below zero",
        [_overlay("a", _req(TYPE, "In", "small-instance-type"), priceAdjustment="-100")],
        prices={("small-instance-type", Z1, "spot"): 0.0},
    ),
    Case(
        "offering requirements select only the matching offerings (zone)",
        [_overlay("a", _req(TYPE, "In", "default-instance-type"), _req(labels.LABEL_ZONE, "In", Z2), price="9")],
        prices={("default-instance-type", Z2, "on-demand"): 9.0, ("default-instance-type", Z1, "on-demand"): 1.02},
    ),
    Case(
        "offering requirements select only the matching offerings (capacity type)",
        [
            _overlay(
                "a",
                _req(TYPE, "In", "gpu-vendor-instance-type"),
                _req(labels.LABEL_CAPACITY_TYPE, "In", "spot"),
                price="0.1",
            )
        ],
        prices={("gpu-vendor-instance-type", Z1, "spot"): 0.1, ("gpu-vendor-instance-type", Z1, "on-demand"): 1.02},
    ),
    Case(
        "overlapping price overlays of equal weight: the later name wins, the other conflicts",
        [
            _overlay(
                "overlay-a", _req(TYPE, "In", "default-instance-type", "small-instance-type"), weight=10, price="1.03"
            ),
            _overlay(
                "overlay-b",
                _req(TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
                weight=10,
                price="23",
            ),
        ],
        conflicting=frozenset({"overlay-a"}),
        prices={
            ("default-instance-type", Z1, "spot"): 23.0,
            ("gpu-vendor-instance-type", Z1, "spot"): 23.0,
            ("small-instance-type", Z1, "spot"): 1.02,
        },
    ),
    Case(
        "equal price overlays of equal weight still conflict",
        [
            _overlay(
                "overlay-a",
                _req(TYPE, "In", "default-instance-type", "small-instance-type"),
                weight=10,
                priceAdjustment="+100",
            ),
            _overlay(
                "overlay-b",
                _req(TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
                weight=10,
                priceAdjustment="+100",
            ),
        ],
        conflicting=frozenset({"overlay-a"}),
        prices={
            ("default-instance-type", Z1, "spot"): 101.02,
            ("gpu-vendor-instance-type", Z1, "spot"): 101.02,
            ("small-instance-type", Z1, "spot"): 1.02,
        },
    ),
    Case(
        "mutually exclusive requirements do not conflict",
        [
            _overlay("overlay-a", _req(TYPE, "In", "default-instance-type"), weight=10, price="54"),
            _overlay("overlay-b", _req(TYPE, "NotIn", "default-instance-type"), weight=10, price="23"),
        ],
        prices={
            (t, Z1, "spot"): 23.0
            for t in ("small-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type")
        }
        | {("default-instance-type", Z1, "spot"): 54.0},
    ),
    Case(
        "different weights do not conflict: the heavier sets the price",
        [
            _overlay("overlay-a", _req(TYPE, "In", "default-instance-type"), weight=10, price="34"),
            _overlay(
                "overlay-b", _req(TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"), weight=20, price="2"
            ),
        ],
        prices={("default-instance-type", Z1, "spot"): 2.0, ("gpu-vendor-instance-type", Z1, "spot"): 2.0},
    ),
    Case(
        "capacity adds an extended resource",
        [_overlay("a", _req(TYPE, "In", "default-instance-type"), capacity={FUSE: "1"})],
        capacity={"default-instance-type": {FUSE: 1000}},
    ),
    Case(
        "the heavier capacity overlay wins a resource both set",
        [
            _overlay("overlay-a", _req(TYPE, "In", "default-instance-type"), weight=10, capacity={FUSE: "5"}),
            _overlay("overlay-b", _req(TYPE, "In", "default-instance-type"), weight=20, capacity={FUSE: "99"}),
        ],
        capacity={"default-instance-type": {FUSE: 99_000}},
    ),
    Case(
        "capacity overlays of equal weight on one resource conflict, and the loser applies nowhere",
        [
            _overlay(
                "overlay-a",
                _req(TYPE, "In", "default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"),
                weight=10,
                capacity={"smarter-devices/buz": "54"},
            ),
            _overlay(
                "overlay-b",
                _req(TYPE, "In", "small-instance-type", "gpu-vendor-instance-type"),
                weight=10,
                capacity={"smarter-devices/buz": "21"},
            ),
        ],
        conflicting=frozenset({"overlay-a"}),
        capacity={
            "small-instance-type": {"smarter-devices/buz": 21_000},
            "gpu-vendor-instance-type": {"smarter-devices/buz": 21_000},
        },
    ),
    Case(
        "capacity overlays of equal weight on different resources merge",
        [
            _overlay("overlay-a", _req(TYPE, "In", "default-instance-type"), weight=10, capacity={FUSE: "1"}),
            _overlay(
                "overlay-b", _req(TYPE, "In", "default-instance-type"), weight=10, capacity={"hugepages-1Gi": "2Gi"}
            ),
        ],
        capacity={"default-instance-type": {FUSE: 1000, "hugepages-1Gi": 2 * quantity.GI}},
    ),
    Case(
        "a price and a capacity overlay both apply to one type",
        [
            _overlay("overlay-a", _req(TYPE, "In", "default-instance-type"), weight=10, price="7"),
            _overlay("overlay-b", _req(TYPE, "In", "default-instance-type"), weight=10, capacity={FUSE: "3"}),
        ],
        prices={("default-instance-type", Z1, "spot"): 7.0},
        capacity={"default-instance-type": {FUSE: 3000}},
    ),
    Case(
        "the pool name selects: an overlay of another pool applies nowhere here",
        [_overlay("a", _req(labels.LABEL_NODEPOOL, "In", "other"), price="5")],
    ),
    Case(
        "a custom label no type or pool defines does not match",
        [_overlay("a", _req("example.com/team", "In", "ml"), price="5")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_overlays_as_upstream_applies_them(case: Case) -> None:
    pool, catalog = builders.parsed_nodepool(), _catalog()
    evaluation = overlay.evaluate(case.overlays, [pool], {pool.name: catalog})
    assert evaluation.conflicting == case.conflicting
    applied = {it.name: it for it in evaluation.store.apply(pool.name, catalog)}
    for it in catalog:
        for o in it.offerings:
            want = case.prices.get((it.name, o.zone, o.capacity_type))
            got = next(x for x in applied[it.name].offerings if (x.zone, x.capacity_type) == (o.zone, o.capacity_type))
            if want is not None:
                assert got.price == pytest.approx(want)
                assert got.price_overlaid is (want != o.price)
            elif not any(k[0] == it.name for k in case.prices):
                assert got == o  # a type no overlay selects keeps its offerings
        added = {k: v for k, v in applied[it.name].capacity.items() if k not in it.capacity}
        assert added == dict(case.capacity.get(it.name, {}))
        assert applied[it.name].capacity_overlaid is (it.name in case.capacity)
        assert applied[it.name].allocatable.keys() >= added.keys()  # schedulable, not only listed


def test_the_pools_template_labels_select() -> None:
    ml, web = (
        builders.parsed_nodepool("ml", labels={"team": "ml"}),
        builders.parsed_nodepool("web", labels={"team": "web"}),
    )
    catalog = _catalog()
    chosen = _overlay("a", _req("team", "In", "ml"), capacity={FUSE: "1"})
    evaluation = overlay.evaluate([chosen], [ml, web], {"ml": catalog, "web": catalog})
    assert all(it.capacity.get(FUSE) == 1000 for it in evaluation.store.apply("ml", catalog))
    assert evaluation.store.apply("web", catalog) is catalog


def test_a_conflict_in_one_pool_refuses_the_overlay_in_every_pool() -> None:
    a, b = builders.parsed_nodepool("a"), builders.parsed_nodepool("b")
    catalog = _catalog()
    only_a = _overlay("overlay-z", _req(labels.LABEL_NODEPOOL, "In", "a"), weight=5, price="1")
    everywhere = _overlay("overlay-y", _req(TYPE, "Exists"), weight=5, price="2")
    evaluation = overlay.evaluate([only_a, everywhere], [a, b], {"a": catalog, "b": catalog})
    assert evaluation.conflicting == {"overlay-y"}
    assert evaluation.store.apply("b", catalog) is catalog


def test_a_pool_not_evaluated_is_refused_until_it_is() -> None:
    listed, unlisted = builders.parsed_nodepool("listed"), builders.parsed_nodepool("unlisted")
    store = overlay.evaluate([], [listed, unlisted], {"listed": _catalog()}).store
    with pytest.raises(cloudprovider_errors.UnevaluatedNodePool):
        store.apply("unlisted", [])
    with pytest.raises(cloudprovider_errors.UnevaluatedNodePool):
        overlay.Store().apply("listed", [])


def test_launches_of_a_standalone_claim_see_list_prices() -> None:
    holder, catalog = overlay.Overlays(), _catalog()
    assert holder.for_launch({}, catalog) is catalog
    with pytest.raises(cloudprovider_errors.UnevaluatedNodePool):
        holder.for_launch({labels.LABEL_NODEPOOL: "default"}, catalog)


@pytest.mark.parametrize(
    ("price", "change", "expected"),
    [
        (1.0, None, 1.0),
        (1.0, "", 1.0),
        (1.0, "2.5", 2.5),
        (1.0, "+0.5", 1.5),
        (1.0, "-0.25", 0.75),
        (1.0, "-2", 0.0),
        (2.0, "+10%", 2.2),
        (2.0, "-15%", 1.7),
        (2.0, "-100%", 0.0),
        (2.0, "+298%", 7.96),
    ],
)
def test_adjusted_price(price: float, change: str | None, expected: float) -> None:
    assert nodeoverlay.adjusted_price(price, change) == pytest.approx(expected)


def test_weight_order_is_heaviest_first_then_later_names_first() -> None:
    ordered = nodeoverlay.by_weight(
        [
            _overlay(n, _req(TYPE, "Exists"), **({"weight": w} if w else {}))
            for n, w in (("a", 0), ("b", 5), ("c", 5), ("cc", 5))
        ]
    )
    assert [o.name for o in ordered] == ["cc", "c", "b", "a"]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"weight": 0}, "spec.weight"),
        ({"price": "1", "priceAdjustment": "+1"}, "spec"),
        ({"priceAdjustment": "10%"}, "spec.priceAdjustment"),
        ({"capacity": {"cpu": "1"}}, "spec.capacity"),
        ({"requirements": [_req(TYPE, "In", "a b")]}, "spec.requirements[0].values[0]"),
    ],
)
def test_the_parser_names_the_bad_field(spec: dict[str, Any], path: str) -> None:
    body = {"requirements": [_req(TYPE, "Exists")], **spec}
    with pytest.raises(errors.ValidationError) as refused:
        parse.nodeoverlay(
            {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "bad"}, "spec": body}
        )
    assert [p.path for p in refused.value.problems] == [path]
    assert "NodeOverlay" in str(refused.value)
    assert "bad" in str(refused.value)
