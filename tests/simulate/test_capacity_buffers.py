"""CapacityBuffers in `karpy simulate`: each buffer resolved against the manifests' PodTemplate or workload and sized
as the controller sizes it (`karpy.capacitybuffer.resolve`), its virtual pods planned like pending pods, so the plan
launches the room the controller keeps; a claim only the room needs says why, and a buffer that does not resolve
keeps no room and says why (the controller's ReadyForProvisioning reason and message)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.simulate import builders
from tests.simulate.test_cli import plan, run

from karpy.simulate import buffers


def _deployment(name: str, replicas: int, cpu: str = "1") -> str:
    return f"""
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: shop}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def _buffer(name: str, ref: str, size: str) -> str:
    return f"""
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {{name: {name}, namespace: shop}}
spec:
  {ref}
  {size}
"""


TEMPLATE = """
---
apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: shop}
template:
  metadata: {labels: {app: chunk}}
  spec:
    containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
"""
WEB_REF = "scalableRef: {apiGroup: apps, kind: Deployment, name: web}"


def _write(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "in.yaml"
    path.write_text(builders.NODEPOOL + "".join(docs))
    return str(path)


def _planned(result: dict[str, object]) -> list[str]:
    claims = result["nodeclaims"]
    assert isinstance(claims, list)
    return sorted(p for c in claims for p in c["pods"])


def test_a_buffer_for_a_deployment_gets_room_for_its_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = plan(capsys, "-f", _write(tmp_path, _deployment("web", 2), _buffer("room", WEB_REF, "replicas: 3")))
    room = [f"shop/capacity-buffer-room-{i}" for i in (1, 2, 3)]
    assert [p for p in _planned(result) if "capacity-buffer" in p] == room
    assert len(_planned(result)) == 5  # the two web pods and the room for three more
    (entry,) = result["capacity_buffers"]  # type: ignore[misc]
    assert entry == {"name": "shop/room", "replicas": 3, "ready": True, "reason": "Resolved", "pods": room}


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("percentage: 50", 2),  # of 3 web replicas, rounded up (helpers.go calculatePercentageReplicas)
        ("{percentage: 50, replicas: 1}", 2),  # the larger of the two (controller.go computeReplicas)
        ("{replicas: 5, limits: {cpu: 2500m}}", 2),  # capped by what fits in the limits
    ],
)
def test_a_buffer_is_sized_as_the_controller_sizes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: str, expected: int
) -> None:
    spec = size if not size.startswith("{") else size[1:-1].replace(", ", "\n  ")
    result = plan(capsys, "-f", _write(tmp_path, _deployment("web", 3), _buffer("room", WEB_REF, spec)))
    (entry,) = result["capacity_buffers"]  # type: ignore[misc]
    assert entry["replicas"] == expected


def test_a_claim_only_the_room_needs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, TEMPLATE, _buffer("batch", "podTemplateRef: {name: chunk}", "limits: {cpu: '8'}"))
    result = plan(capsys, "-f", path)
    claims = result["nodeclaims"]
    assert isinstance(claims, list)
    assert claims
    assert {c.get("reason") for c in claims} == {buffers.REASON}
    assert len(_planned(result)) == 4  # 8 CPU of 2-CPU chunks
    code, out, _ = run(capsys, "-f", path)
    assert code == 0
    assert "Of which for CapacityBuffers:" in out
    assert "shop/batch" in out


def test_a_buffer_that_does_not_resolve_keeps_no_room_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        _deployment("web", 1),
        _buffer("lost", "podTemplateRef: {name: nowhere}", "replicas: 2"),
        _buffer("job", "scalableRef: {apiGroup: batch, kind: Job, name: web}", "replicas: 2"),
    )
    result = plan(capsys, "-f", path)
    assert not [p for p in _planned(result) if "capacity-buffer" in p]
    by_name = {b["name"]: b for b in result["capacity_buffers"]}  # type: ignore[attr-defined]
    assert by_name["shop/lost"] == {
        "name": "shop/lost",
        "replicas": 0,
        "ready": False,
        "reason": "PodTemplateNotFound",
        "message": 'podtemplates "nowhere" not found',
        "pods": [],
    }
    assert (by_name["shop/job"]["reason"], by_name["shop/job"]["message"]) == (
        "ResolutionFailed",
        'unsupported scalableRef API group "batch"',
    )
    code, out, _ = run(capsys, "-f", path)
    assert code == 0
    assert 'PodTemplateNotFound: podtemplates "nowhere" not found' in out


def test_a_pod_template_the_api_server_would_refuse_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = TEMPLATE.replace('requests: {cpu: "2"}', 'requests: {cpu: "two"}')
    code, _, err = run(capsys, "-f", _write(tmp_path, bad))
    assert code == 2
    assert "in.yaml#" in err
    assert "template.spec.containers[0].resources.requests" in err
    assert "Traceback" not in err
