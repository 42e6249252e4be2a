"""The EBS CSI driver's zone key is the zone, as a user meets it: a StatefulSet whose StorageClass restricts
`topology.ebs.csi.aws.com/zone`, through `karpy simulate` and `karpy explain` (the scheduler's own cases are in
tests/scheduling/upstream/cases/aws_ebs_csi_zone.yaml)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.simulate import builders

from karpy import cli

EXPLAIN_DUMP = Path(__file__).resolve().parents[2] / "examples" / "explain" / "cluster.yaml"
EBS_CLASS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.ebs.csi.aws.com/zone, values: [us-east-1b]}
"""
STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      storageClassName: gp3
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 10Gi}}
"""


def test_simulate_places_an_ebs_statefulset_in_its_class_zone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("\n---\n".join([builders.NODEPOOL, EBS_CLASS, STATEFULSET]))
    assert cli.main(["simulate", "-f", str(path), "-o", "json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert result["unschedulable"] == []
    placed = {pod: claim["zone"] for claim in result["nodeclaims"] for pod in claim["pods"]}
    assert placed == {"default/db-0": "us-east-1b", "default/db-1": "us-east-1b"}


PENDING_CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0, namespace: default}
spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: default}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
"""


def test_explain_places_a_pending_ebs_pod_in_its_class_zone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = tmp_path / "ebs.yaml"
    extra.write_text(EBS_CLASS + "---\n" + PENDING_CLAIM)
    code = cli.main(
        ["explain", "-f", str(EXPLAIN_DUMP), "-f", str(extra), "--now", "2027-01-15T08:00:00Z", "-o", "json",
         "--no-repack", "--simulations", "0"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    (found,) = [p for p in json.loads(out)["pending"] if p["pod"] == "default/db-0"]
    assert found["schedulable"], found["reason"]
    # the dump's one node in us-east-1b has room: the pod is nominated there, not to a node of another zone
    assert found["node"] == "ip-10-0-1-0.ec2.internal"
