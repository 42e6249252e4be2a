"""`karpy simulate` on a real application, as a platform engineer feeds it one: the rendering of a small Helm chart
(`apps/webapp`, rendered by the real helm of `make tools`) piped to `-f -` or written out as a directory tree, and a
kustomize-style multi-document stream on standard input. Kinds that take no part in scheduling are skipped with
one summary line (refused under `--strict`); an empty input and an input with no NodePool say so and exit 3."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.simulate import builders

from karpy import cli

REPO = Path(__file__).resolve().parents[2]
HELM = REPO / ".tools" / "bin" / "helm"
CHART = Path(__file__).resolve().parent / "apps" / "webapp"
SKIPPED = (
    "karpy simulate: skipped 5 documents that take no part in scheduling: ConfigMap (1), Ingress (1), Secret (1), "
    "Service (1), ServiceAccount (1) (--strict refuses them)"
)


def helm(*args: str, home: Path) -> str:
    if not HELM.exists():
        pytest.fail(f"{HELM} is missing: run `make tools`")
    env = {**os.environ, **{f"HELM_{d}_HOME": str(home / d.lower()) for d in ("CACHE", "CONFIG", "DATA")}}
    done = subprocess.run([str(HELM), *args], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def karpy(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: its own process, the input on a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", *args], input=stdin, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.fixture
def pool_file(tmp_path: Path) -> str:
    path = tmp_path / "pool.yaml"
    path.write_text(builders.NODEPOOL)
    return str(path)


def placed(result: dict[str, Any]) -> dict[str, str]:
    return {pod: claim["zone"] for claim in result["nodeclaims"] for pod in claim["pods"]}


def test_helm_template_piped_to_simulate(tmp_path: Path, pool_file: str) -> None:
    rendered = helm("template", "shop", str(CHART), home=tmp_path)
    done = karpy("simulate", "-f", pool_file, "-f", "-", "-o", "json", stdin=rendered)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [SKIPPED]
    result = json.loads(done.stdout)
    assert result["unschedulable"] == []
    zones = placed(result)
    assert sorted(zones) == ["default/shop-0", "default/shop-1", "default/shop-2", "default/shop-cache-0",
                             "default/shop-cache-1"]  # fmt: skip
    # the cache's claims are zoned by the EBS CSI driver's key: their pods go to that zone
    assert {zones["default/shop-cache-0"], zones["default/shop-cache-1"]} == {"us-east-1a"}


def test_helm_output_dir_is_read_recursively(
    tmp_path: Path, pool_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rendered"
    helm("template", "shop", str(CHART), "--output-dir", str(out), home=tmp_path)
    assert not list(out.glob("*.yaml")), "helm nests the files: webapp/templates/*.yaml"
    (out / ".git").mkdir()
    (out / ".git" / "junk.yaml").write_text("not: [a manifest")  # hidden directories are not read
    assert cli.main(["simulate", "-f", pool_file, "-f", str(out), "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [SKIPPED]
    assert len(placed(json.loads(captured.out))) == 5


def test_strict_refuses_what_takes_no_part_in_scheduling(tmp_path: Path, pool_file: str) -> None:
    rendered = helm("template", "shop", str(CHART), home=tmp_path)
    done = karpy("simulate", "--strict", "-f", pool_file, "-f", "-", stdin=rendered)
    assert done.returncode == 2
    # the first such document of the stream (helm renders ServiceAccounts first), at the line of its `kind`
    assert done.stderr.startswith("karpy simulate: <stdin>#1 (line 4): kind: 'ServiceAccount' takes no part in")
    assert rendered.splitlines()[3] == "kind: ServiceAccount"
    assert "Traceback" not in done.stderr


KUSTOMIZED = """apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: shop}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: api, namespace: shop}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}, maxReplicas: 5}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: api:1, resources: {requests: {cpu: 250m, memory: 256Mi}}}]
"""


def stdin_of(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def test_a_kustomize_stream_on_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin_of(monkeypatch, builders.NODEPOOL + "---\n" + KUSTOMIZED)
    assert cli.main(["simulate", "-f", "-", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        "karpy simulate: skipped 3 documents that take no part in scheduling: HorizontalPodAutoscaler (1), "
        "Namespace (1), Role (1) (--strict refuses them)\n"
    )
    assert sorted(placed(json.loads(captured.out))) == ["shop/api-0", "shop/api-1"]


def test_standard_input_is_read_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "-f", "-", "-f", "-"]) == 2
    assert capsys.readouterr().err == "karpy simulate: -: standard input can be read only once\n"


def test_an_empty_input_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stdin_of(monkeypatch, "---\n# nothing rendered\n")
    assert cli.main(["simulate", "-f", "-"]) == 3
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "karpy simulate: <stdin>: no documents: the input is empty\n")


def test_no_nodepool_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "app.yaml"
    app.write_text(KUSTOMIZED)
    assert cli.main(["simulate", "-f", str(app)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("karpy simulate: skipped 3 documents")
    assert err[1] == (
        f"karpy simulate: {app}: no NodePool in the input: Karpenter launches nodes only for a NodePool (and its "
        "EC2NodeClass); add them, e.g. examples/manifests/00-ec2nodeclass.yaml and 01-nodepools.yaml"
    )


HUGE = """
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.k8s.aws/instance-category, operator: In, values: [g, p]}]
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""


def test_a_reason_leads_with_the_decisive_constraint_per_nodepool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(builders.NODEPOOL + HUGE + builders.pod_manifest("huge").replace("memory: 1Gi", "memory: 8Ti"))
    assert cli.main(["simulate", "-f", str(path), "-o", "json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["unschedulable"]
    # the event's words, NodePools in weight order (upstream's FailedScheduling text)
    assert found["reason"].startswith('incompatible with nodepool "gpu", daemonset overhead={}, did not tolerate')
    assert [(p["nodepool"], p["kind"]) for p in found["nodepools"]] == [("default", "resources"), ("gpu", "taint")]
    decisive = found["nodepools"][0]["decisive"]
    assert decisive.startswith("requests more than any instance type offers: memory 8Ti (the most any instance")
    assert "cpu" not in decisive, "1 CPU fits: only what no instance type has room for is named"
    assert found["nodepools"][1]["decisive"] == "did not tolerate nvidia.com/gpu=:NoSchedule"

    assert cli.main(["simulate", "-f", str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    at = table.index("  default/huge: cannot be scheduled")
    assert table[at + 1].startswith("    nodepool default (resources): requests more than any instance type offers:")
    assert table[at + 3] == "    nodepool gpu (taint): did not tolerate nvidia.com/gpu=:NoSchedule"
    assert table[at + 4].startswith('    event text: incompatible with nodepool "gpu"')
    assert all(len(line) <= 120 for line in table), "long reasons are wrapped"
