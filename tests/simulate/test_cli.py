"""`karpy simulate` end to end through `cli.main`: the JSON contract, the table, and exit 2 on bad input."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from tests.simulate import builders

from karpy import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
CONTRACT_KEYS = {"nodeclaims", "existing_nodes", "unschedulable", "cost_per_hour", "lower_bound_per_hour"}
CLAIM_KEYS = {
    "name", "nodepool", "instance_type", "instance_type_options", "zone", "capacity_type", "price_per_hour",
    "requests", "pods",
}  # fmt: skip

NODECLASS, POOL, NODEPOOL = builders.NODECLASS, builders.POOL, builders.NODEPOOL


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


pod_manifest = builders.pod_manifest


@pytest.fixture(scope="module")
def example_plan() -> dict[str, Any]:
    # Module-scoped (the examples take a few seconds to plan), so capture stdout by hand rather than with capsys.
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert cli.main(["simulate", "-f", str(EXAMPLES), "-o", "json"]) == 0
    result: dict[str, Any] = json.loads(buffer.getvalue())
    return result


def test_json_contract_shape(example_plan: dict[str, Any]) -> None:
    assert set(example_plan) == {*CONTRACT_KEYS, "capacity_buffers"}  # the examples have CapacityBuffers
    assert example_plan["nodeclaims"], "the examples need new capacity"
    for claim in example_plan["nodeclaims"]:
        assert set(claim) - {"reason"} == CLAIM_KEYS  # "reason": a claim only a buffer's room needs
        assert claim["instance_type"] == claim["instance_type_options"][0], "the cheapest option comes first"
        assert claim["capacity_type"] in {"on-demand", "spot"}
        assert claim["zone"].startswith("us-east-1")
        assert claim["pods"] == sorted(claim["pods"])
    names = [c["name"] for c in example_plan["nodeclaims"]]
    assert len(names) == len(set(names))
    total = sum(c["price_per_hour"] for c in example_plan["nodeclaims"])
    assert example_plan["cost_per_hour"] == pytest.approx(total, abs=1e-5)
    assert 0 < example_plan["lower_bound_per_hour"] <= example_plan["cost_per_hour"] + 1e-9


def claim_of(result: dict[str, Any], pod: str) -> dict[str, Any]:
    return next(c for c in result["nodeclaims"] if pod in c["pods"])


def test_examples_honour_constraints(example_plan: dict[str, Any]) -> None:
    # A claim bound to a volume in us-east-1c runs there; WaitForFirstConsumer claims stay in the class's zones.
    assert claim_of(example_plan, "data/reporter")["zone"] == "us-east-1c"
    for i in range(3):
        assert claim_of(example_plan, f"data/db-{i}")["zone"] in {"us-east-1a", "us-east-1b"}
    # Tainted pools only get pods that tolerate them; GPU pods land on GPU capacity.
    for claim in example_plan["nodeclaims"]:
        if claim["nodepool"] == "spot-batch":
            assert all(p.startswith("batch/render-") for p in claim["pods"])
            assert claim["capacity_type"] == "spot"
        if claim["nodepool"] == "gpu":
            assert all(p.startswith("ml/inference-") for p in claim["pods"])
    # Anti-affinity: no two cache replicas share a claim.
    cache_claims = [c["name"] for c in example_plan["nodeclaims"] for p in c["pods"] if p.startswith("shop/cache-")]
    assert len(cache_claims) == len(set(cache_claims))
    # The existing node with room takes pods before any new claim.
    assert example_plan["existing_nodes"][0]["name"] == "ip-10-0-1-17.ec2.internal"
    assert "shop/report-builder" in example_plan["existing_nodes"][0]["pods"]


def test_examples_explain_unschedulable_pods(example_plan: dict[str, Any]) -> None:
    reasons = {u["pod"]: u["reason"] for u in example_plan["unschedulable"]}
    assert "no instance type satisfied resources" in reasons["misc/too-big"]
    assert "kubernetes.io/os" in reasons["misc/wants-windows"]
    assert '"team"' in reasons["misc/wants-team-label"]
    assert 'nodepool "default"' in reasons["misc/too-big"], "the reason names the pool that was tried"


def test_zone_constrained_pod_shows_its_zone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    selector = "  nodeSelector: {topology.kubernetes.io/zone: us-east-1d}"
    (tmp_path / "m.yaml").write_text(NODEPOOL + pod_manifest("pinned", extra_spec=selector))
    result = plan(capsys, "-f", str(tmp_path))
    (claim,) = result["nodeclaims"]
    assert claim["zone"] == "us-east-1d"
    assert claim["pods"] == ["default/pinned"]


def test_zones_flag_limits_offerings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.yaml").write_text(NODEPOOL + pod_manifest("a") + pod_manifest("b", cpu="70"))
    result = plan(capsys, "-f", str(tmp_path), "--zones", "us-east-1b")
    assert {c["zone"] for c in result["nodeclaims"]} == {"us-east-1b"}


def test_fake_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.yaml").write_text(NODEPOOL.replace("In, values: [c, m]", "Exists") + pod_manifest("a", cpu="3"))
    result = plan(capsys, "-f", str(tmp_path), "--catalog", "fake:10")
    (claim,) = result["nodeclaims"]
    assert claim["zone"].startswith("test-zone-")
    assert result["unschedulable"] == []


NODE = """
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {karpenter.sh/nodepool: default, topology.kubernetes.io/zone: us-east-1a}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
"""
VOLUMES = """
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-a, namespace: default}
spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-b, namespace: default}
spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def _mounting(name: str, claim: str) -> str:
    return pod_manifest(name, extra_spec=f"  volumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}]")


def test_a_csinode_limits_the_volumes_of_its_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csinode = """
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-a}
spec:
  drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 1}}]
"""
    pods = _mounting("a", "data-a") + _mounting("b", "data-b")
    (tmp_path / "m.yaml").write_text(NODEPOOL + NODE + VOLUMES + pods)
    unlimited = plan(capsys, "-f", str(tmp_path))
    assert unlimited["existing_nodes"] == [{"name": "node-a", "pods": ["default/a", "default/b"]}]
    (tmp_path / "m.yaml").write_text(NODEPOOL + NODE + VOLUMES + csinode + pods)
    limited = plan(capsys, "-f", str(tmp_path))
    assert limited["existing_nodes"] == [{"name": "node-a", "pods": ["default/a"]}]
    assert [c["pods"] for c in limited["nodeclaims"]] == [["default/b"]]


def test_policies_are_the_controllers_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preferred = """  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 1
          preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1f]}]}
"""
    picky = NODEPOOL.replace(
        "In, values: [c, m]}",
        "In, values: [c, m]}\n        - {key: kubernetes.io/arch, operator: Exists, minValues: 3}",
    )
    (tmp_path / "pref.yaml").write_text(NODEPOOL + pod_manifest("a", extra_spec=preferred))
    assert plan(capsys, "-f", str(tmp_path / "pref.yaml"))["nodeclaims"][0]["zone"] == "us-east-1f"
    ignored = plan(capsys, "-f", str(tmp_path / "pref.yaml"), "--preference-policy", "Ignore")
    assert ignored["nodeclaims"][0]["zone"] != "us-east-1f"  # us-east-1f is dearer than the cheapest zone
    (tmp_path / "min.yaml").write_text(picky + pod_manifest("b"))
    strict = plan(capsys, "-f", str(tmp_path / "min.yaml"))
    assert [u["pod"] for u in strict["unschedulable"]] == ["default/b"]  # two architectures exist, not three
    relaxed = plan(capsys, "-f", str(tmp_path / "min.yaml"), "--min-values-policy", "BestEffort")
    assert [c["pods"] for c in relaxed["nodeclaims"]] == [["default/b"]]
    with pytest.raises(SystemExit) as usage:
        run(capsys, "-f", str(tmp_path / "min.yaml"), "--min-values-policy", "Loose")
    assert usage.value.code == 2
    assert "--min-values-policy: invalid choice: 'Loose'" in capsys.readouterr().err


IN_FLIGHT = """
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels:
    karpenter.sh/nodepool: default
    topology.kubernetes.io/zone: us-east-1a
    node.kubernetes.io/instance-type: m5.xlarge
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}]
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}
"""


def test_an_in_flight_nodeclaim_takes_pods_before_new_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(
        NODEPOOL + IN_FLIGHT + pod_manifest("a") + pod_manifest("b") + pod_manifest("c", cpu="3")
    )
    result = plan(capsys, "-f", str(tmp_path))
    assert result["existing_nodes"] == [{"name": "default-abcde", "pods": ["default/c"]}]  # 3.92 CPU: c fits first
    assert sorted(p for c in result["nodeclaims"] for p in c["pods"]) == ["default/a", "default/b"]
    (tmp_path / "m.yaml").write_text(
        NODEPOOL + IN_FLIGHT.replace('  allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}\n', "")
    )
    code, _, err = run(capsys, "-f", str(tmp_path))
    assert code == 2
    assert "NodeClaim 'default-abcde': status.allocatable: required" in err


def test_pods_of_a_deleting_node_are_scheduled_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deleting = NODE.replace("  name: node-a\n", "  name: node-a\n  deletionTimestamp: '2026-01-01T00:00:00Z'\n")
    bound = pod_manifest("running").replace("spec:\n", "spec:\n  nodeName: node-a\n")
    (tmp_path / "m.yaml").write_text(NODEPOOL + deleting + bound + pod_manifest("pending"))
    result = plan(capsys, "-f", str(tmp_path))
    assert result["existing_nodes"] == []
    assert sorted(p for c in result["nodeclaims"] for p in c["pods"]) == ["default/pending", "default/running"]


PDB_NEVER = """
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: running, namespace: default}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: running}}
"""


@pytest.mark.parametrize("blocker", ["do-not-disrupt", "pdb"])
def test_a_pod_of_a_deleting_node_that_cannot_be_evicted_is_not_planned_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], blocker: str
) -> None:
    """As the provisioner (core: pkg/utils/pdb/pdb.go IsCurrentlyReschedulable): it stays where it is for now."""
    deleting = NODE.replace("  name: node-a\n", "  name: node-a\n  deletionTimestamp: '2026-01-01T00:00:00Z'\n")
    bound = pod_manifest("running").replace("spec:\n", "spec:\n  nodeName: node-a\n")
    meta = "{name: running, namespace: default"
    if blocker == "pdb":
        bound = bound.replace(meta, meta + ", labels: {app: running}") + PDB_NEVER
    else:
        bound = bound.replace(meta, meta + ", annotations: {karpenter.sh/do-not-disrupt: 'true'}")
    (tmp_path / "m.yaml").write_text(NODEPOOL + deleting + bound + pod_manifest("pending"))
    result = plan(capsys, "-f", str(tmp_path))
    assert sorted(p for c in result["nodeclaims"] for p in c["pods"]) == ["default/pending"]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(EXAMPLES))
    assert code == 0
    assert "NodeClaims to create:" in out
    assert "NODEPOOL" in out
    assert "ZONE" in out
    assert "$/H" in out
    assert "Pods that cannot be scheduled:" in out
    assert "misc/too-big:" in out
    assert "fractional lower bound" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            NODEPOOL.replace("operator: In", "operator: Equals"),
            'spec.template.spec.requirements[0].operator: unsupported operator "Equals"',
        ),
        ("kind: [unclosed\n", "invalid YAML"),
        ("- just\n- a list\n", "a manifest must be a mapping"),
        (NODEPOOL + "---\n" + POOL, "metadata.name: NodePool default is defined more than once (first in"),
    ],
)
def test_invalid_input_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    code, out, err = run(capsys, "-f", str(tmp_path / "bad.yaml"))
    assert code == 2
    assert out == ""
    assert expected in err
    assert "Traceback" not in err


def test_missing_path_and_bad_catalog_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "no such file or directory" in err
    (tmp_path / "m.yaml").write_text(NODEPOOL + pod_manifest("a"))
    code, _, err = run(capsys, "-f", str(tmp_path), "--catalog", "gcp")
    assert code == 2
    assert "--catalog" in err
    code, _, err = run(capsys, "-f", str(tmp_path), "--zones", "mars-1a")
    assert code == 2
    assert "--region/--zones" in err
