"""Static NodePools (`spec.replicas`) in `karpy simulate`: the NodeClaims the controller's static-pool reconciler
creates (`karpy.static`), with their reason, and pending pods nominated to them as to claims in flight."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.simulate import builders
from tests.simulate.test_cli import plan, run

from karpy.simulate import static


def _static_pool(replicas: int, *, limits: str = "") -> str:
    return f"""
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: fixed}}
spec:
  replicas: {replicas}
{limits}  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
"""


CLAIMED = """
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: fixed-abcde
  labels:
    karpenter.sh/nodepool: fixed
    topology.kubernetes.io/zone: us-east-1a
    node.kubernetes.io/instance-type: m5.large
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
"""


def _static_claims(result: dict[str, object]) -> list[dict[str, object]]:
    claims = result["nodeclaims"]
    assert isinstance(claims, list)
    return [c for c in claims if c.get("reason") == static.REASON]


def test_a_static_pool_gets_its_replicas_and_pods_land_on_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(builders.NODECLASS + _static_pool(3) + builders.pod_manifest("a"))
    result = plan(capsys, "-f", str(tmp_path))
    claims = _static_claims(result)
    assert [(c["name"], c["nodepool"], c["instance_type"]) for c in claims] == [
        ("fixed-1", "fixed", "m5.large"),
        ("fixed-2", "fixed", "m5.large"),
        ("fixed-3", "fixed", "m5.large"),
    ]  # the cheapest offering the pool's requirements allow, as the provider launches a static claim
    assert len(result["nodeclaims"]) == 3  # the pod needs no claim of its own: it is nominated to a static one
    assert sorted(p for c in claims for p in c["pods"]) == ["default/a"]
    assert result["unschedulable"] == []
    assert result["cost_per_hour"] == pytest.approx(sum(c["price_per_hour"] for c in claims))


def test_claims_the_pool_has_count_and_limits_nodes_caps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.yaml").write_text(builders.NODECLASS + _static_pool(3) + CLAIMED)
    assert [c["name"] for c in _static_claims(plan(capsys, "-f", str(tmp_path)))] == ["fixed-1", "fixed-2"]
    (tmp_path / "m.yaml").write_text(builders.NODECLASS + _static_pool(3, limits="  limits: {nodes: 2}\n"))
    assert [c["name"] for c in _static_claims(plan(capsys, "-f", str(tmp_path)))] == ["fixed-1", "fixed-2"]


def test_the_table_names_the_static_claims_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.yaml").write_text(builders.NODECLASS + _static_pool(2))
    code, out, err = run(capsys, "-f", str(tmp_path))
    assert code == 0, err
    assert "NodeClaims to create: 2" in out
    assert f"Of which for static NodePools: fixed-1, fixed-2 ({static.REASON})" in out
