"""Every Pulumi program in the repository runs under mocks: the root stack and the three examples."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from .conftest import ACCOUNT, Deployment, Run

REPO = Path(__file__).resolve().parents[2]
EKS_ADMIN_OIDC = f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"


def load(directory: str) -> ModuleType:
    """Import a program's `__main__.py` under another name, so its `if __name__ == "__main__"` block stays idle."""
    path = REPO / directory / "__main__.py"
    spec = importlib.util.spec_from_file_location(f"program_{directory.replace('/', '_').replace('-', '_')}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class body runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def main_of(directory: str) -> Callable[[], Mapping[str, Any]]:
    main: Callable[[], Mapping[str, Any]] = load(directory).main
    return main


def types_named(deployment: Deployment) -> set[tuple[str, str]]:
    return {(r.type, r.name) for r in deployment.resources}


@pytest.mark.parametrize(
    "directory",
    [".", "examples/new-cluster", "examples/reuse-in-your-program", "examples/migrate-from-managed-node-groups"],
)
def test_pulumi_yaml_points_at_a_python_program(directory: str) -> None:
    project = yaml.safe_load((REPO / directory / "Pulumi.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    main = REPO / directory / project.get("main", ".") / "__main__.py"
    assert main.is_file(), main


def test_root_program_installs_karpy_from_stack_config(pulumi_run: Run) -> None:
    deployment = pulumi_run(
        main_of("infra/program"),
        config={"karpy:clusterName": "prod", "karpy:defaultNodePool": "true", "aws:region": "us-west-2"},
    )
    names = types_named(deployment)
    assert ("karpy:index:Karpenter", "karpy") in names
    assert ("pulumi:providers:aws", "aws") in names
    assert ("pulumi:providers:kubernetes", "kubernetes") in names
    assert ("kubernetes:karpenter.sh/v1:NodePool", "karpy-default-nodepool") in names
    assert deployment.outputs["releaseStatus"] == "deployed"
    assert len(deployment.outputs["ruleNames"]) == 5
    pia = deployment.get("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpy-pod-identity")
    assert pia.inputs["clusterName"] == "prod"


def test_root_program_irsa_without_queue(pulumi_run: Run) -> None:
    deployment = pulumi_run(
        main_of("infra/program"),
        config={
            "karpy:clusterName": "prod",
            "karpy:identityMode": "irsa",
            "karpy:oidcProviderArn": EKS_ADMIN_OIDC,
            "karpy:oidcIssuerUrl": "https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
            "karpy:interruptionQueue": "false",
        },
    )
    assert deployment.of_type("aws:sqs/queue:Queue") == []
    assert deployment.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation") == []
    assert deployment.outputs["queueName"] is None


def test_root_program_requires_the_cluster_name(pulumi_run: Run) -> None:
    with pytest.raises(Exception, match="clusterName"):
        pulumi_run(main_of("infra/program"), config={})


def test_new_cluster_example(pulumi_run: Run) -> None:
    deployment = pulumi_run(
        main_of("examples/new-cluster"), config={"aws:region": "us-west-2"}, project="karpy-new-cluster"
    )
    names = types_named(deployment)
    for expected in [
        ("aws:ec2/vpc:Vpc", "karpy-demo-vpc"),
        ("aws:eks/cluster:Cluster", "karpy-demo"),
        ("aws:eks/nodeGroup:NodeGroup", "karpy-demo-system"),
        ("aws:eks/addon:Addon", "karpy-demo-pod-identity"),
        ("karpy:index:DiscoveryTags", "karpy-demo-discovery"),
        ("karpy:index:Karpenter", "karpy"),
        ("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "karpy-default-nodeclass"),
        ("kubernetes:karpenter.sh/v1:NodePool", "karpy-default-nodepool"),
        ("kubernetes:apps/v1:Deployment", "inflate"),
    ]:
        assert expected in names, expected
    assert len(deployment.of_type("aws:ec2/subnet:Subnet")) == 4
    tags = {r.name: r.inputs for r in deployment.of_type("aws:ec2/tag:Tag")}
    assert tags["karpy-demo-discovery-sg-0"]["resourceId"] == "sg-cluster"
    assert tags["karpy-demo-discovery-subnet-0"]["value"] == "karpy-demo"
    release = deployment.get("kubernetes:helm.sh/v3:Release", "karpy-controller")
    assert release.inputs["values"]["nodeSelector"] == {"karpy.dev/system": "true"}
    assert release.inputs["values"]["settings"]["clusterEndpoint"].startswith("https://karpy-demo.")
    kubeconfig = json.loads(deployment.outputs["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["args"][-1] == "karpy-demo"
    inflate = deployment.get("kubernetes:apps/v1:Deployment", "inflate")
    assert inflate.inputs["spec"]["replicas"] == 0


def test_reuse_example_uses_explicit_providers(pulumi_run: Run) -> None:
    deployment = pulumi_run(
        main_of("examples/reuse-in-your-program"),
        project="karpy-reuse",
        config={
            "karpy-reuse:clusterName": "prod",
            "karpy-reuse:oidcProviderArn": EKS_ADMIN_OIDC,
            "karpy-reuse:oidcIssuerUrl": "https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
            "karpy-reuse:targetRoleArn": f"arn:aws:iam::{ACCOUNT}:role/deployer",
        },
    )
    for resource in deployment.resources:
        if resource.type.startswith("aws:"):
            assert "pulumi:providers:aws::platform-aws" in resource.provider, resource.name
        elif resource.type.startswith("kubernetes:"):
            assert "pulumi:providers:kubernetes::platform-k8s" in resource.provider, resource.name
    nodeclass = deployment.get("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "batch-nodeclass")
    role = deployment.get("aws:iam/role:Role", "autoscaling-node")
    assert nodeclass.inputs["spec"]["role"] == role.inputs["name"]
    values = deployment.get("kubernetes:helm.sh/v3:Release", "autoscaling-controller").inputs["values"]
    assert values["settings"]["featureGates"] == {"nodeRepair": True}
    assert "eks.amazonaws.com/role-arn" in values["serviceAccount"]["annotations"]


MIGRATION_CONFIG = {
    "aws:region": "us-west-2",
    "karpy-migrate-from-mng:clusterName": "prod",
    "karpy-migrate-from-mng:nodeGroupName": "general",
    "karpy-migrate-from-mng:nodeGroupRoleArn": f"arn:aws:iam::{ACCOUNT}:role/general",
    "karpy-migrate-from-mng:subnetIds": '["subnet-a", "subnet-b"]',
    "karpy-migrate-from-mng:securityGroupId": "sg-1",
    "karpy-migrate-from-mng:instanceFamilies": '["m5", "m6i", "c6i"]',
    "karpy-migrate-from-mng:nodeGroupSize": '{"min": 3, "desired": 6, "max": 10}',
}


@pytest.mark.parametrize(
    ("phase", "karpy", "pools", "autoscaler_replicas", "desired"),
    [
        (0, False, False, 1, 6),
        (1, True, False, 1, 6),
        (2, True, True, 1, 6),
        (3, True, True, 0, 2),
        (4, True, True, None, 2),
    ],
)
def test_migration_phases(
    pulumi_run: Run, phase: int, karpy: bool, pools: bool, autoscaler_replicas: int | None, desired: int
) -> None:
    config = {**MIGRATION_CONFIG, "karpy-migrate-from-mng:phase": str(phase)}
    deployment = pulumi_run(
        main_of("examples/migrate-from-managed-node-groups"), config=config, project="karpy-migrate-from-mng"
    )
    names = types_named(deployment)
    assert (("karpy:index:Karpenter", "karpy") in names) is karpy
    assert (("karpy:index:DiscoveryTags", "discovery") in names) is karpy
    assert (("kubernetes:karpenter.sh/v1:NodePool", "migrated-families") in names) is pools
    node_group = deployment.get("aws:eks/nodeGroup:NodeGroup", "node-group")
    assert node_group.inputs["scalingConfig"]["desiredSize"] == desired
    assert deployment.outputs["nodeGroupDesired"] == desired
    autoscaler = [r for r in deployment.of_type("kubernetes:helm.sh/v3:Release") if r.name == "cluster-autoscaler"]
    if autoscaler_replicas is None:
        assert autoscaler == []
    else:
        assert autoscaler[0].inputs["values"]["replicaCount"] == autoscaler_replicas
    if karpy:
        values = deployment.get("kubernetes:helm.sh/v3:Release", "karpy-controller").inputs["values"]
        assert values["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "general"}
    if pools:
        pool = deployment.get("kubernetes:karpenter.sh/v1:NodePool", "migrated-families").inputs["spec"]
        families = pool["template"]["spec"]["requirements"][0]
        assert families == {
            "key": "karpenter.k8s.aws/instance-family",
            "operator": "In",
            "values": ["m5", "m6i", "c6i"],
        }
        default_pool = deployment.get("kubernetes:karpenter.sh/v1:NodePool", "karpy-default-nodepool").inputs["spec"]
        categories = default_pool["template"]["spec"]["requirements"][3]
        assert categories["values"] == ["c", "m"]


def test_migration_rejects_an_unknown_phase() -> None:
    plan_type = load("examples/migrate-from-managed-node-groups").Plan
    with pytest.raises(ValueError, match=r"phase: 5 must be 0\.\.4"):
        plan_type(5)
