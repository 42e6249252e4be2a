"""examples/migrate-from-karpenter under Pulumi's mocks: what each phase declares (the runbook's promises)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .conftest import ACCOUNT, Run
from .test_programs import load, main_of

DIRECTORY = "examples/migrate-from-karpenter"
PROJECT = "karpy-migrate-from-karpenter"
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/KarpenterNodeRole-prod"
CONFIG = {
    "aws:region": "us-west-2",
    f"{PROJECT}:clusterName": "prod",
    f"{PROJECT}:nodeRoleArn": NODE_ROLE,
}
CRD_PATCH = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch"
DEPLOYMENT_PATCH = "kubernetes:apps/v1:DeploymentPatch"
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_the_stack_is_a_python_program() -> None:
    project = yaml.safe_load((Path(__file__).resolve().parents[2] / DIRECTORY / "Pulumi.yaml").read_text())
    assert project["name"] == PROJECT
    assert project["runtime"]["name"] == "python"


@pytest.mark.parametrize(
    ("phase", "dry_run", "crd_release", "adopted", "upstream_at_zero", "shares_lease"),
    [
        (0, True, False, 0, False, False),  # shadow: nothing of upstream's touched
        (1, False, True, 5, True, True),  # switch: upstream v1.14's five CRDs, CapacityBuffer's included
        (2, False, True, 5, False, True),  # upstream gone: no patch left on a Deployment that no longer exists
    ],
)
def test_each_phase(
    pulumi_run: Run,
    phase: int,
    dry_run: bool,
    crd_release: bool,
    adopted: int,
    upstream_at_zero: bool,
    shares_lease: bool,
) -> None:
    config = {**CONFIG, f"{PROJECT}:phase": str(phase)}
    deployment = pulumi_run(main_of(DIRECTORY), config=config, project=PROJECT)
    releases = {r.name: r for r in deployment.of_type(RELEASE)}
    values = releases["karpy-controller"].inputs["values"]
    assert values["settings"]["dryRun"] is dry_run
    assert ("karpy-crd" in releases) is crd_release
    assert len(deployment.of_type(CRD_PATCH)) == adopted
    patches = deployment.of_type(DEPLOYMENT_PATCH)
    assert bool(patches) is upstream_at_zero
    if patches:
        (patch,) = patches
        assert patch.inputs["spec"] == {"replicas": 0}
        assert patch.inputs["metadata"]["name"] == "karpenter"
        assert patch.inputs["metadata"]["namespace"] == "kube-system"
    assert (values["settings"].get("leaderElectionName") == "karpenter-leader-election") is shares_lease
    # Upstream's node role is reused (its EC2NodeClasses name it) and already has access: none is created.
    assert [r.name for r in deployment.of_type("aws:iam/role:Role")] == ["karpy-controller"]
    assert deployment.of_type("aws:eks/accessEntry:AccessEntry") == []
    assert deployment.outputs["dryRun"] is dry_run


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match=r"phase: 3 must be 0\.\.2"):
        load(DIRECTORY).Plan(3)
