"""`karpy simulate` plans with a node class's EFA-only interfaces as the controller does: one on network card 0
leaves m6idn.32xlarge 345 pods, not 394 (aws: pkg/providers/instancetype/suite_test.go "Network Interfaces")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.simulate import builders

from karpy import cli

EFA_ON_CARD_0 = """  networkInterfaces:
    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}
    - {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}
"""
M6IDN = "{key: node.kubernetes.io/instance-type, operator: In, values: [m6idn.32xlarge]}"
PODS = """
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: many, namespace: default}
spec:
  replicas: 346
  selector: {matchLabels: {app: many}}
  template:
    metadata: {labels: {app: many}}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 10m, memory: 16Mi}}}]
"""


def _claims(tmp_path: Path, capsys: pytest.CaptureFixture[str], nodeclass: str) -> list[int]:
    (tmp_path / "m.yaml").write_text(nodeclass + "---\n" + builders.pool_manifest(M6IDN) + PODS)
    assert cli.main(["simulate", "-f", str(tmp_path), "-o", "json"]) == 0
    out, err = capsys.readouterr()
    result: dict[str, Any] = json.loads(out)
    assert result["unschedulable"] == [], err
    return sorted(len(c["pods"]) for c in result["nodeclaims"])


def test_346_pods_take_one_node_but_two_with_an_efa_only_interface_on_card_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _claims(tmp_path, capsys, builders.NODECLASS) == [346]  # 8 ENIs × 49 + 2 = 394 pods
    assert _claims(tmp_path, capsys, builders.NODECLASS + EFA_ON_CARD_0) == [1, 345]  # 7 × 49 + 2


def test_a_type_that_cannot_take_the_interfaces_is_not_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    five_efas = EFA_ON_CARD_0 + "".join(
        f"    - {{networkCardIndex: {card}, deviceIndex: 0, interfaceType: efa-only}}\n" for card in range(1, 5)
    )
    (tmp_path / "m.yaml").write_text(builders.NODECLASS + five_efas + "---\n" + builders.pool_manifest(M6IDN) + PODS)
    assert cli.main(["simulate", "-f", str(tmp_path), "-o", "json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert result["nodeclaims"] == []
    assert len(result["unschedulable"]) == 346
