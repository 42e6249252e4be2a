"""AMD GPU pods against the bundled AWS catalog, which carries the g4ad family (Radeon Pro V520) again: upstream's
"should launch instances for amd.com/gpu resource requests" (aws: pkg/providers/instancetype/suite_test.go) as data,
through `karpy simulate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.simulate import builders

from karpy import cli

ON_DEMAND = "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"
UPSTREAMS_CATALOG = "{key: node.kubernetes.io/instance-type, operator: In, values: [g4ad.16xlarge]}"
"""Upstream's fake catalog (aws: pkg/fake/zz_generated.describe_instance_types.go) has one AMD shape,
g4ad.16xlarge."""


def _gpu_pod(name: str, gpus: int) -> str:
    amd = f'{{amd.com/gpu: "{gpus}"}}'
    return builders.pod_manifest(name, resources=f"{{requests: {amd}, limits: {amd}}}")


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], *requirements: str) -> list[tuple[list[str], str]]:
    pool = builders.pool_manifest(*requirements)
    manifests = builders.NODECLASS + "---\n" + pool + _gpu_pod("one", 1) + _gpu_pod("two", 2) + _gpu_pod("four", 4)
    (tmp_path / "m.yaml").write_text(manifests)
    assert cli.main(["simulate", "-f", str(tmp_path), "-o", "json"]) == 0
    out, err = capsys.readouterr()
    result: dict[str, Any] = json.loads(out)
    assert result["unschedulable"] == [], err
    return sorted((sorted(c["pods"]), c["instance_type"]) for c in result["nodeclaims"])


def test_upstreams_amd_gpu_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One and two GPUs pack onto one g4ad.16xlarge (4 GPUs); four need a second one.
    assert _plan(tmp_path, capsys, ON_DEMAND, UPSTREAMS_CATALOG) == [
        (["default/four"], "g4ad.16xlarge"),
        (["default/one", "default/two"], "g4ad.16xlarge"),
    ]


def test_the_whole_g4ad_family_is_there_to_choose_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # With every size: each pod on the cheapest size with its GPUs (xlarge 1, 8xlarge 2, 16xlarge 4).
    assert _plan(tmp_path, capsys, ON_DEMAND) == [
        (["default/four"], "g4ad.16xlarge"),
        (["default/one"], "g4ad.xlarge"),
        (["default/two"], "g4ad.8xlarge"),
    ]
