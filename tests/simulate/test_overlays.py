"""NodeOverlays in `karpy simulate`'s input: priced and capacity-extended instance types change the plan as they
change the controller's (core: pkg/cloudprovider/overlay), and a bad overlay is refused naming its file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.simulate import builders
from tests.simulate.test_cli import plan, run

POOL_M5 = (
    builders.NODECLASS
    + "---\n"
    + builders.pool_manifest(
        "{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m6i.large, m7i.large]}",
        "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
    )
)


TYPE = "node.kubernetes.io/instance-type"
ALL_TYPES = "  requirements: [{key: node.kubernetes.io/instance-type, operator: Exists}]\n"


def _overlay(name: str, spec: str) -> str:
    return f"""
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: {name}}}
spec:
{spec}"""


def test_an_overlay_making_the_cheapest_type_dear_moves_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(POOL_M5 + builders.pod_manifest("a"))
    before = plan(capsys, "-f", str(tmp_path))["nodeclaims"][0]
    dear = _overlay(
        "dear",
        f"  requirements: [{{key: {TYPE}, operator: In, values: [{before['instance_type']}]}}]\n"
        '  priceAdjustment: "+1000%"\n',
    )
    (tmp_path / "o.yaml").write_text(dear)
    after = plan(capsys, "-f", str(tmp_path))["nodeclaims"][0]
    assert after["instance_type"] != before["instance_type"]
    assert after["price_per_hour"] >= before["price_per_hour"]


def test_an_absolute_price_sets_the_plans_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cheap = _overlay(
        "cheap",
        f'  requirements: [{{key: {TYPE}, operator: In, values: [m7i.large]}}]\n  price: "0.001"\n',
    )
    (tmp_path / "m.yaml").write_text(POOL_M5 + builders.pod_manifest("a") + cheap)
    (claim,) = plan(capsys, "-f", str(tmp_path))["nodeclaims"]
    assert (claim["instance_type"], claim["price_per_hour"]) == ("m7i.large", pytest.approx(0.001))


def test_a_capacity_overlay_lets_an_extended_resource_pod_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wants_fuse = """
---
apiVersion: v1
kind: Pod
metadata: {name: fuse, namespace: default}
spec:
  containers:
    - name: c
      image: busybox
      resources: {requests: {cpu: "1", smarter-devices/fuse: "1"}, limits: {smarter-devices/fuse: "1"}}
"""
    (tmp_path / "m.yaml").write_text(POOL_M5 + wants_fuse)
    assert [u["pod"] for u in plan(capsys, "-f", str(tmp_path))["unschedulable"]] == ["default/fuse"]
    fuse = _overlay(
        "fuse",
        ALL_TYPES + '  capacity: {smarter-devices/fuse: "2"}\n',
    )
    (tmp_path / "o.yaml").write_text(fuse)
    result = plan(capsys, "-f", str(tmp_path))
    assert result["unschedulable"] == []
    assert [c["pods"] for c in result["nodeclaims"]] == [["default/fuse"]]


def test_a_bad_overlay_is_refused_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _overlay("bad", ALL_TYPES + '  capacity: {cpu: "2"}\n')
    (tmp_path / "o.yaml").write_text(POOL_M5 + bad)
    code, out, err = run(capsys, "-f", str(tmp_path / "o.yaml"))
    assert (code, out) == (2, "")
    assert "o.yaml" in err
    assert "NodeOverlay" in err
    assert "spec.capacity" in err


def test_overlays_of_equal_weight_that_both_price_a_type_are_reported_in_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The later of two same-weight overlays setting one offering's price is refused everywhere, as the controller
    refuses it with ValidationSucceeded=False, reason Conflict; simulate says so and plans without it."""
    m7i = f"  requirements: [{{key: {TYPE}, operator: In, values: [m7i.large]}}]\n"
    # equal weights go in reverse name order (core: OrderByWeight): b-cheap first, a-dear is the later one
    first = _overlay("b-cheap", m7i + '  weight: 10\n  price: "0.001"\n')
    second = _overlay("a-dear", m7i + '  weight: 10\n  price: "9"\n')
    lighter = _overlay("c-light", m7i + '  weight: 1\n  priceAdjustment: "+1%"\n')
    (tmp_path / "m.yaml").write_text(POOL_M5 + builders.pod_manifest("a") + first + second + lighter)
    doc = plan(capsys, "-f", str(tmp_path))
    assert doc["nodeoverlays"] == [
        {"name": "a-dear", "applied": False, "reason": "Conflict", "message": "conflict with another overlay"},
        {"name": "b-cheap", "applied": True},
        {"name": "c-light", "applied": True},  # a lighter overlay conflicts with nobody
    ]
    (claim,) = doc["nodeclaims"]
    assert (claim["instance_type"], claim["price_per_hour"]) == ("m7i.large", pytest.approx(0.001))
    code, table, _ = run(capsys, "-f", str(tmp_path))
    assert code == 0
    assert "NodeOverlays not applied: 1" in table
    assert "a-dear: Conflict, conflict with another overlay" in table


def test_a_plan_without_overlays_has_no_overlay_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.yaml").write_text(POOL_M5 + builders.pod_manifest("a"))
    assert "nodeoverlays" not in plan(capsys, "-f", str(tmp_path))
