"""The demo's pure parts: NodeClaim rows (state and price from labels and conditions), when a step has settled,
the rendered frame and summary, and the manifests it applies (valid against the CRD schemas via karpy.api)."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy.api import labels, parse
from karpy_emulator import demo, view

PRICES = {("c6a.large", "us-east-1a", "on-demand"): 0.0765}


TYPED = {
    labels.LABEL_INSTANCE_TYPE: "c6a.large",
    labels.LABEL_ZONE: "us-east-1a",
    labels.LABEL_CAPACITY_TYPE: "on-demand",
}
LAUNCHED = [builders.condition("Launched"), builders.condition("Registered")]
READY = [*LAUNCHED, builders.condition("Initialized")]


@pytest.mark.parametrize(
    ("claim", "state", "price"),
    [
        (builders.nodeclaim("a"), "launching", None),
        (builders.nodeclaim("b", labels=TYPED, conditions=LAUNCHED), "registered", 0.0765),
        (builders.nodeclaim("c", labels=TYPED, conditions=READY), "ready", 0.0765),
        (builders.deleting(builders.nodeclaim("d", labels=TYPED, conditions=READY)), "deleting", 0.0765),
    ],
)
def test_claim_row(claim: dict[str, Any], state: str, price: float | None) -> None:
    row = demo.claim_row(claim, PRICES)
    assert (row.state, row.price) == (state, price)


def _snap(pods: int, *, bound: bool = True, claims: int = 1, deleting: int = 0) -> demo.Snapshot:
    claim_list = [builders.nodeclaim(f"c{i}", labels=TYPED) for i in range(claims)]
    claim_list[:deleting] = [builders.deleting(claim) for claim in claim_list[:deleting]]
    pod_list = [builders.pod(node="n1" if bound else "") for _ in range(pods)]
    return demo.Snapshot(pod_list, claim_list, [{"metadata": {}}] * claims)


@pytest.mark.parametrize(
    ("snap", "replicas", "previous", "removed", "quiet", "settled"),
    [
        (_snap(8), 8, 0, False, False, True),  # scale-up: all bound is enough
        (_snap(8, bound=False), 8, 0, False, False, False),
        (_snap(7), 8, 0, False, False, False),
        (_snap(5), 5, 40, False, True, False),  # scale-down waits for a removal ...
        (_snap(5), 5, 40, True, False, False),  # ... and a quiet disruption pass
        (_snap(5, claims=2, deleting=1), 5, 40, True, True, False),
        (_snap(5), 5, 40, True, True, True),
        (_snap(0, claims=1), 0, 5, True, True, False),  # zero: nothing may be left
        (_snap(0, claims=0), 0, 5, True, True, True),
    ],
)
def test_settled(snap: demo.Snapshot, replicas: int, previous: int, removed: bool, quiet: bool, settled: bool) -> None:
    assert demo.Demo._settled(snap, replicas=replicas, previous=previous, removed=removed, quiet=quiet) is settled


def test_frame_and_summary_render() -> None:
    rows = (
        demo.claim_row(
            builders.nodeclaim("default-abc", labels=TYPED, conditions=[builders.condition("Initialized")]), PRICES
        ),
        demo.claim_row(builders.nodeclaim("x", labels=TYPED), PRICES),
    )
    frame = view.Frame("scale 0 → 8", 1.5, pods=8, pending=2, claims=rows, nodes=2, nodes_ready=1, events=("e1",))
    text = "\n".join(view.render(frame))
    assert "8 (2 pending)" in text
    assert "nodes: 1/2 ready" in text
    assert "default-abc" in text
    assert "$0.0765/h" in text
    assert frame.cost_per_hour == pytest.approx(2 * 0.0765)
    summary = view.Summary(
        steps=(view.StepReport(8, 9.0, 1, 0.3, True), view.StepReport(0, 30.0, 0, 0.0, False)),
        launched=3,
        terminated=2,
        peak_nodes=2,
        seconds=50.0,
    )
    assert not summary.ok
    lines = view.render_summary(summary)
    assert "NOT SETTLED" in lines[-2]
    assert lines[-1].endswith("FAILED")
    assert view.trim(["a", "b", "c"], 2) == ["a", "    ... 2 more"]


def test_demo_manifests_parse() -> None:
    assert parse.nodepool(demo.nodepool_manifest(consolidate_after="15s")).disruption.consolidate_after == 15.0
    nc = parse.ec2nodeclass(demo.nodeclass_manifest(role="KarpenterNodeRole-demo", discovery="karpy-demo"))
    assert nc.spec.role == "KarpenterNodeRole-demo"
    inflate = demo.inflate_manifest(3)
    assert inflate["spec"]["replicas"] == 3
    assert inflate["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
