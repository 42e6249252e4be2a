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

from .conftest import ACCOUNT, NODE_GROUPS, Deployment, Run

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
    assert ("docker-build:index:Image", "karpy-image") in names  # built by default
    assert "@sha256:" in deployment.outputs["imageRef"]


def test_root_program_deploys_a_given_image(pulumi_run: Run) -> None:
    reference = "registry.example.com/karpy@sha256:" + "d" * 64
    deployment = pulumi_run(
        main_of("infra/program"), config={"karpy:clusterName": "prod", "karpy:imageReference": reference}
    )
    assert deployment.of_type("docker-build:index:Image") == []
    assert deployment.outputs["imageRef"] == reference


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
    assert release.inputs["values"]["nodeSelector"] == {"karpy.dev/system": "true", "kubernetes.io/arch": "amd64"}
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
    "karpy-migrate-from-mng:nodeGroups": '["system", "general"]',
    "karpy-migrate-from-mng:systemNodeGroup": "system",
    "karpy-migrate-from-mng:subnetIds": '["subnet-a", "subnet-b"]',
    "karpy-migrate-from-mng:securityGroupId": "sg-1",
}
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"


def migrate(run: Run, phase: int, **extra: str) -> Deployment:
    config = {
        **MIGRATION_CONFIG,
        "karpy-migrate-from-mng:phase": str(phase),
        **{f"karpy-migrate-from-mng:{k}": v for k, v in extra.items()},
    }
    return run(main_of("examples/migrate-from-managed-node-groups"), config=config, project="karpy-migrate-from-mng")


def as_reported(name: str) -> dict[str, Any]:
    """What `pulumi preview` compares against after the import: the node group's inputs as EKS reports them."""
    live = NODE_GROUPS[name]
    template = live["launchTemplates"][0] if live["launchTemplates"] else None
    remote = live["remoteAccesses"][0] if live["remoteAccesses"] else None
    update = {k: v for k, v in live["updateConfigs"][0].items() if v}
    scaling = live["scalingConfigs"][0]
    expected: dict[str, Any] = {
        "clusterName": live["clusterName"],
        "nodeGroupName": name,
        "nodeRoleArn": live["nodeRoleArn"],
        "subnetIds": live["subnetIds"],
        "instanceTypes": live["instanceTypes"],
        "amiType": live["amiType"],
        "capacityType": live["capacityType"],
        "version": live["version"],
        "releaseVersion": live["releaseVersion"],
        "labels": live["labels"],
        "taints": live["taints"],
        "tags": live["tags"],
        "scalingConfig": {k: scaling[k] for k in ("minSize", "desiredSize", "maxSize")},
        "updateConfig": update,
    }
    if template is not None:
        expected["launchTemplate"] = {"id": template["id"], "version": template["version"]}
    else:
        expected["diskSize"] = live["diskSize"]
        expected["remoteAccess"] = remote
    return expected


def declared(deployment: Deployment, name: str) -> dict[str, Any]:
    inputs = deployment.get(NODE_GROUP, f"node-group-{name}").inputs
    return {k: v for k, v in inputs.items() if k not in ("name", "arn")}  # the mocks' own outputs


@pytest.mark.parametrize("name", ["system", "general"])
def test_the_import_step_declares_every_input_of_each_node_group(pulumi_run: Run, name: str) -> None:
    deployment = migrate(pulumi_run, 0)
    assert declared(deployment, name) == as_reported(name)
    assert deployment.get(NODE_GROUP, f"node-group-{name}").import_id == f"prod:{name}"
    later = migrate(pulumi_run, 2)
    assert declared(later, name) == as_reported(name), "no change until phase 3"
    assert later.get(NODE_GROUP, f"node-group-{name}").import_id == ""


def test_phase_3_changes_only_the_scaling(pulumi_run: Run) -> None:
    deployment = migrate(pulumi_run, 3, nodeGroupFloor="2")
    for name, size in (("system", 2), ("general", 0)):
        now = declared(deployment, name)
        assert now["scalingConfig"] == {"minSize": size, "desiredSize": size, "maxSize": max(size, 1)}
        assert {k: v for k, v in now.items() if k != "scalingConfig"} == {
            k: v for k, v in as_reported(name).items() if k != "scalingConfig"
        }
    assert deployment.outputs["systemDesired"] == 2
    assert deployment.outputs["generalDesired"] == 0


@pytest.mark.parametrize(
    ("phase", "karpy", "pools", "autoscaler_replicas"),
    [(0, False, False, 1), (1, True, False, 1), (2, True, True, 1), (3, True, True, 0), (4, True, True, None)],
)
def test_migration_phases(
    pulumi_run: Run, phase: int, karpy: bool, pools: bool, autoscaler_replicas: int | None
) -> None:
    deployment = migrate(pulumi_run, phase)
    names = types_named(deployment)
    assert (("karpy:index:Karpenter", "karpy") in names) is karpy
    assert (("karpy:index:DiscoveryTags", "discovery") in names) is karpy
    assert (("kubernetes:karpenter.sh/v1:NodePool", "migrated-families") in names) is pools
    assert (("kubernetes:karpenter.sh/v1:NodePool", "karpy-default-nodepool") in names) is pools
    autoscaler = [r for r in deployment.of_type(RELEASE) if r.name == "cluster-autoscaler"]
    if autoscaler_replicas is None:
        assert autoscaler == []
    else:
        assert autoscaler[0].inputs["values"]["replicaCount"] == autoscaler_replicas
    if karpy:
        values = deployment.get(RELEASE, "karpy-controller").inputs["values"]
        assert values["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "system", "kubernetes.io/arch": "amd64"}
    if pools:
        pool = deployment.get("kubernetes:karpenter.sh/v1:NodePool", "migrated-families").inputs["spec"]
        families = pool["template"]["spec"]["requirements"][0]
        # every node group's families, from what EKS reports
        assert families == {
            "key": "karpenter.k8s.aws/instance-family",
            "operator": "In",
            "values": ["c6i", "m5", "m6i"],
        }


def test_pod_identity_agent_is_created_or_required(pulumi_run: Run) -> None:
    created = migrate(pulumi_run, 1, podIdentityAgent="create")
    addon = created.get("aws:eks/addon:Addon", "karpy-pod-identity-agent").inputs
    assert (addon["addonName"], addon["clusterName"]) == ("eks-pod-identity-agent", "prod")
    required = migrate(pulumi_run, 1)
    assert required.of_type("aws:eks/addon:Addon") == []  # present: looked up (the lookup fails when it is not)
    with pytest.raises(ValueError, match="podIdentityAgent"):
        migrate(pulumi_run, 1, podIdentityAgent="maybe")


def test_config_map_clusters_get_the_node_role_into_aws_auth(pulumi_run: Run) -> None:
    existing = [{"rolearn": NODE_GROUPS["system"]["nodeRoleArn"], "username": "system:node:{{EC2PrivateDNSName}}",
                 "groups": ["system:bootstrappers", "system:nodes"]}]  # fmt: skip
    deployment = migrate(pulumi_run, 1, accessMode="aws_auth", awsAuthMapRoles=json.dumps(existing))
    assert deployment.of_type("aws:eks/accessEntry:AccessEntry") == []
    roles = yaml.safe_load(
        deployment.get("kubernetes:core/v1:ConfigMapPatch", "karpy-aws-auth").inputs["data"]["mapRoles"]
    )
    assert roles[0] == existing[0]
    node_role = deployment.get("aws:iam/role:Role", "karpy-node").inputs
    assert roles[1]["rolearn"] == f"arn:aws:iam::{ACCOUNT}:role/{node_role['name']}"
    assert len(roles) == 2


def test_addons_can_be_pinned_to_the_system_node_group(pulumi_run: Run) -> None:
    deployment = migrate(pulumi_run, 1, pinAddons="true")
    for addon in ("coredns", "metrics-server"):
        patch = deployment.get("kubernetes:apps/v1:DeploymentPatch", f"{addon}-on-system").inputs
        assert patch["metadata"]["name"] == addon
        assert patch["spec"]["template"]["spec"]["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "system"}
    assert migrate(pulumi_run, 1).of_type("kubernetes:apps/v1:DeploymentPatch") == []


def test_the_system_node_group_must_be_one_of_the_node_groups(pulumi_run: Run) -> None:
    with pytest.raises(ValueError, match="systemNodeGroup"):
        migrate(pulumi_run, 0, systemNodeGroup="other")


def test_migration_rejects_an_unknown_phase() -> None:
    plan_type = load("examples/migrate-from-managed-node-groups").Plan
    with pytest.raises(ValueError, match=r"phase: 5 must be 0\.\.4"):
        plan_type(5)
