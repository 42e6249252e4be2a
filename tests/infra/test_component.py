"""The Karpenter component under Pulumi's mocks: every resource, input, parent, dependency and output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
import yaml

from karpy.api import crds as api_crds
from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import charts, component, discovery, documents, identity, policy
from pulumi_karpy import spec as pulumi_karpy_spec

from .conftest import ACCOUNT, REGION, Deployment, Run

OIDC_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.{REGION}.amazonaws.com/id/ABC"
OIDC_URL = f"https://oidc.eks.{REGION}.amazonaws.com/id/ABC"
COMPONENT_URN_SUFFIX = "karpy:index:Karpenter::karpy"
ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/policy:Policy"
QUEUE = "aws:sqs/queue:Queue"
QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
PIA = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ACCESS = "aws:eks/accessEntry:AccessEntry"
CM_PATCH = "kubernetes:core/v1:ConfigMapPatch"
PROFILE = "aws:iam/instanceProfile:InstanceProfile"
CR_NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CR_NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"


def deploy(run: Run, karpenter_args: pulumi_karpy_args.KarpenterArgs, *, partition: str = "aws") -> Deployment:
    def program() -> Mapping[str, Any]:
        aws_provider = aws.Provider("aws", region=REGION)
        k8s_provider = k8s.Provider("k8s", kubeconfig="{}")
        karpenter = component.Karpenter(
            "karpy", karpenter_args, opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider])
        )
        return {
            "controller_role_arn": karpenter.controller_role_arn,
            "controller_role_name": karpenter.controller_role_name,
            "node_role_arn": karpenter.node_role_arn,
            "node_role_name": karpenter.node_role_name,
            "instance_profile_name": karpenter.instance_profile_name,
            "queue_name": karpenter.queue_name,
            "queue_arn": karpenter.queue_arn,
            "queue_url": karpenter.queue_url,
            "rule_names": karpenter.rule_names,
            "namespace": karpenter.namespace,
            "service_account": karpenter.service_account,
            "release_status": karpenter.release_status,
            "image_ref": karpenter.image_ref,
            "image_repository_url": karpenter.image_repository_url,
        }

    return run(program, partition=partition)


def children(deployment: Deployment) -> list[tuple[str, str]]:
    return sorted((r.type, r.name) for r in deployment.resources if not r.type.startswith("pulumi:providers:"))


POLICY_SLUGS = [
    "node-lifecycle",
    "iam-integration",
    "eks-integration",
    "interruption",
    "resource-discovery",
    "zonal-shift",
]
RULE_KEYS = [spec.key for spec in documents.EVENT_RULES]


def expected_children(*, queue: bool = True, pod_identity: bool = True) -> list[tuple[str, str]]:
    slugs = [s for s in POLICY_SLUGS if queue or s != "interruption"]
    found = [
        ("karpy:index:Karpenter", "karpy"),
        ("aws:iam/role:Role", "karpy-node"),
        *[
            ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"karpy-node-{k}")
            for k in ("worker", "ecr", "ssm", "cni")
        ],
        ("aws:iam/role:Role", "karpy-controller"),
        *[("aws:iam/policy:Policy", f"karpy-controller-{s}") for s in slugs],
        *[("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"karpy-controller-{s}") for s in slugs],
        ("aws:eks/accessEntry:AccessEntry", "karpy-node-access"),
        ("kubernetes:helm.sh/v3:Release", "karpy-crd"),
        ("kubernetes:helm.sh/v3:Release", "karpy-controller"),
        ("kubernetes:batch/v1:Job", "karpy-check"),
        ("aws:ecr/repository:Repository", "karpy-image"),
        ("docker-build:index:Image", "karpy-image"),
    ]
    if pod_identity:
        found.append(("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpy-pod-identity"))
    if queue:
        found += [
            ("aws:sqs/queue:Queue", "karpy-queue"),
            ("aws:sqs/queuePolicy:QueuePolicy", "karpy-queue-policy"),
            *[("aws:cloudwatch/eventRule:EventRule", f"karpy-rule-{k}") for k in RULE_KEYS],
            *[("aws:cloudwatch/eventTarget:EventTarget", f"karpy-rule-{k}") for k in RULE_KEYS],
        ]
    return sorted(found)


def test_pod_identity_with_queue_declares_exactly_the_upstream_set(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    assert children(deployment) == expected_children()


def test_every_child_is_parented_and_uses_the_callers_providers(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    for resource in deployment.resources:
        if resource.type.startswith("pulumi:providers:") or resource.type == "karpy:index:Karpenter":
            continue
        assert resource.parent.endswith(COMPONENT_URN_SUFFIX), resource.name
        if resource.type.startswith("docker-build:"):
            assert resource.provider == ""  # the default docker-build provider: it needs no configuration
            continue
        expected_provider = (
            "pulumi:providers:kubernetes::k8s"
            if resource.type.startswith("kubernetes:")
            else ("pulumi:providers:aws::aws")
        )
        assert expected_provider in resource.provider, (resource.name, resource.provider)


def test_outputs(pulumi_run: Run) -> None:
    outputs = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo")).outputs
    assert outputs["controller_role_arn"].startswith(f"arn:aws:iam::{ACCOUNT}:role/karpy-controller-")
    assert outputs["controller_role_name"] in outputs["controller_role_arn"]
    assert outputs["node_role_arn"].startswith(f"arn:aws:iam::{ACCOUNT}:role/karpy-node-")
    assert outputs["node_role_name"] in outputs["node_role_arn"]
    assert outputs["instance_profile_name"] is None
    assert outputs["queue_arn"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:{outputs['queue_name']}"
    assert outputs["queue_url"].endswith(f"/{ACCOUNT}/{outputs['queue_name']}")
    assert sorted(name.rsplit("-", 1)[0] for name in outputs["rule_names"]) == sorted(
        f"karpy-{spec.name}" for spec in documents.EVENT_RULES
    )
    assert outputs["image_repository_url"] == f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/karpy-image-1234567"
    assert outputs["image_ref"].startswith(outputs["image_repository_url"] + "@sha256:")
    assert outputs["namespace"] == "kube-system"
    assert outputs["service_account"] == "karpy"
    assert outputs["release_status"] == "deployed"


def test_controller_policies_are_the_pure_builders_output(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    node_role_arn = deployment.outputs["node_role_arn"]
    expected = policy.build_controller_policies(
        policy.PolicyContext("aws", REGION, ACCOUNT, "demo", node_role_arn, deployment.outputs["queue_arn"])
    )
    for group, doc in expected.items():
        slug = identity._kebab(group.value)
        declared = deployment.get(POLICY, f"karpy-controller-{slug}")
        assert json.loads(declared.inputs["policy"]) == doc
        assert "1.14" in declared.inputs["description"]
        attachment = next(
            r
            for r in deployment.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if r.name == f"karpy-controller-{slug}"
        )
        assert attachment.inputs["role"] == deployment.outputs["controller_role_name"]
        assert attachment.inputs["policyArn"].endswith(f":policy/{declared.inputs['name']}")


def test_pod_identity_trust_and_association(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", namespace="karpy", service_account="ctl")
    )
    trust = json.loads(deployment.get(ROLE, "karpy-controller").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Statement"][0]["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    association = deployment.get(PIA, "karpy-pod-identity").inputs
    assert association["clusterName"] == "demo"
    assert (association["namespace"], association["serviceAccount"]) == ("karpy", "ctl")
    assert association["roleArn"] == deployment.outputs["controller_role_arn"]
    values = controller_values(deployment)
    assert "annotations" not in values["serviceAccount"]
    assert values["serviceAccount"]["name"] == "ctl"


def controller_values(deployment: Deployment) -> dict[str, Any]:
    (release,) = [r for r in deployment.of_type("kubernetes:helm.sh/v3:Release") if r.name == "karpy-controller"]
    return dict(release.inputs["values"])


def test_irsa_trust_and_service_account_annotation(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            identity_mode=pulumi_karpy_args.IdentityMode.IRSA,
            oidc_provider_arn=OIDC_ARN,
            oidc_issuer_url=OIDC_URL,
        ),
    )
    assert children(deployment) == expected_children(pod_identity=False)
    roles = {r.name: r for r in deployment.of_type("aws:iam/role:Role")}
    (statement,) = json.loads(roles["karpy-controller"].inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Federated": OIDC_ARN}
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"]["StringEquals"] == {
        f"oidc.eks.{REGION}.amazonaws.com/id/ABC:sub": "system:serviceaccount:kube-system:karpy",
        f"oidc.eks.{REGION}.amazonaws.com/id/ABC:aud": "sts.amazonaws.com",
    }
    values = controller_values(deployment)
    assert values["serviceAccount"]["annotations"] == {
        charts.IRSA_ANNOTATION: deployment.outputs["controller_role_arn"]
    }


def test_queue_and_rules(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", tags={"team": "platform"}))
    queue = deployment.get(QUEUE, "karpy-queue").inputs
    assert queue["messageRetentionSeconds"] == 300
    assert queue["sqsManagedSseEnabled"] is True
    assert "kmsMasterKeyId" not in queue
    assert queue["tags"] == {"team": "platform"}
    queue_policy = json.loads(deployment.get(QUEUE_POLICY, "karpy-queue-policy").inputs["policy"])
    assert queue_policy == documents.queue_policy(deployment.outputs["queue_arn"])
    assert deployment.get(QUEUE_POLICY, "karpy-queue-policy").inputs["queueUrl"] == deployment.outputs["queue_url"]
    rules = {r.name: r.inputs for r in deployment.of_type("aws:cloudwatch/eventRule:EventRule")}
    targets = {r.name: r.inputs for r in deployment.of_type("aws:cloudwatch/eventTarget:EventTarget")}
    detail_types = set()
    for spec in documents.EVENT_RULES:
        rule = rules[f"karpy-rule-{spec.key}"]
        pattern = json.loads(rule["eventPattern"])
        assert pattern == {"source": [spec.source], "detail-type": [spec.detail_type]}
        detail_types.add(spec.detail_type)
        assert rule["namePrefix"] == f"karpy-{spec.name}-"
        assert "name" not in rule or rule["name"].startswith(rule["namePrefix"])
        assert rule["tags"] == {"team": "platform", "ClusterName": "demo"}
        target = targets[f"karpy-rule-{spec.key}"]
        assert target["arn"] == deployment.outputs["queue_arn"]
        assert target["rule"] == rule["name"]
        assert target["targetId"] == "KarpenterInterruptionQueueTarget"
    assert detail_types == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    assert controller_values(deployment)["settings"]["interruptionQueue"] == deployment.outputs["queue_name"]


def test_kms_key_replaces_sse_sqs(pulumi_run: Run) -> None:
    key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234"
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(kms_master_key_id=key)),
    )
    queue = deployment.get(QUEUE, "karpy-queue").inputs
    assert queue["kmsMasterKeyId"] == key
    assert "sqsManagedSseEnabled" not in queue


def test_without_queue(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(enabled=False)),
    )
    assert children(deployment) == expected_children(queue=False)
    assert deployment.outputs["queue_name"] is None
    assert deployment.outputs["queue_arn"] is None
    assert deployment.outputs["rule_names"] == []
    assert "interruptionQueue" not in controller_values(deployment)["settings"]
    assert "dependencies" not in deployment.get(ACCESS, "karpy-node-access").inputs


def test_helm_releases_crds_first_then_controller(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            cluster_endpoint="https://ABC.gr7.us-west-2.eks.amazonaws.com",
            helm=pulumi_karpy_args.HelmArgs(
                replicas=3,
                log_level="debug",
                values={"settings": {"batchMaxDuration": "20s", "clusterName": "ignored"}, "nodeSelector": {"a": "b"}},
            ),
        ),
    )
    releases = {r.name: r for r in deployment.of_type("kubernetes:helm.sh/v3:Release")}
    crd, controller = releases["karpy-crd"], releases["karpy-controller"]
    assert crd.inputs["chart"].endswith("charts/karpy-crd")
    assert controller.inputs["chart"].endswith("charts/karpy")
    assert not Path(controller.inputs["chart"]).is_absolute()  # another checkout shows no diff
    assert (crd.inputs["version"], controller.inputs["version"]) == (
        pulumi_karpy_args.VERSION,
        pulumi_karpy_args.VERSION,
    )
    assert (
        yaml.safe_load((Path(controller.inputs["chart"]) / "Chart.yaml").read_text())["version"]
        == pulumi_karpy_args.VERSION
    )
    assert controller.inputs["skipCrds"] is True
    assert "skipCrds" not in crd.inputs
    assert (crd.inputs["namespace"], controller.inputs["namespace"]) == ("kube-system", "kube-system")
    assert any(dep.endswith("kubernetes:helm.sh/v3:Release::karpy-crd") for dep in controller.dependencies)
    values = controller.inputs["values"]
    assert values["settings"] == {
        "clusterName": "demo",  # the component's wiring wins over user values
        "awsRegion": REGION,  # the AWS provider's region: the controller never guesses it
        "clusterEndpoint": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        "interruptionQueue": deployment.outputs["queue_name"],
        "batchMaxDuration": "20s",  # deep merge keeps the user's sibling keys
    }
    assert values["nodeSelector"] == {"a": "b", "kubernetes.io/arch": "amd64"}  # merged with the built image's arch
    assert values["replicas"] == 3
    assert values["logLevel"] == "debug"
    assert values["controller"]["image"] == {
        "repository": deployment.outputs["image_repository_url"],
        "digest": deployment.outputs["image_ref"].split("@")[1],
    }
    assert values["controller"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}


def test_access_entry_waits_for_the_queue_policy(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    access = deployment.get(ACCESS, "karpy-node-access")
    assert access.inputs["type"] == "EC2_LINUX"
    assert access.inputs["principalArn"] == deployment.outputs["node_role_arn"]
    assert access.inputs["clusterName"] == "demo"
    assert any(dep.endswith("aws:sqs/queuePolicy:QueuePolicy::karpy-queue-policy") for dep in access.dependencies)


def test_aws_auth_mode_writes_map_roles(pulumi_run: Run) -> None:
    existing = [{"rolearn": "arn:aws:iam::1:role/ng", "username": "system:node:{{EC2PrivateDNSName}}", "groups": ["x"]}]
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            access=pulumi_karpy_args.AccessArgs(
                mode=pulumi_karpy_args.AccessMode.AWS_AUTH, aws_auth_map_roles=existing
            ),
        ),
    )
    assert deployment.of_type("aws:eks/accessEntry:AccessEntry") == []
    patch = deployment.get(CM_PATCH, "karpy-aws-auth").inputs
    assert patch["metadata"] == {"name": "aws-auth", "namespace": "kube-system"}
    roles = yaml.safe_load(patch["data"]["mapRoles"])
    assert roles[0] == existing[0]
    assert roles[1] == {
        "rolearn": deployment.outputs["node_role_arn"],
        "username": "system:node:{{EC2PrivateDNSName}}",
        "groups": ["system:bootstrappers", "system:nodes"],
    }


def test_reused_node_role_with_instance_profile_and_no_access(pulumi_run: Run) -> None:
    arn = f"arn:aws:iam::{ACCOUNT}:role/eks-node-group-role"
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            node_role=pulumi_karpy_args.NodeRoleArgs(create=False, existing_arn=arn, create_instance_profile=True),
            access=pulumi_karpy_args.AccessArgs(mode=pulumi_karpy_args.AccessMode.NONE),
        ),
    )
    names = [name for _, name in children(deployment)]
    assert "karpy-node" not in names
    assert not any(n.startswith("karpy-node-") for n in names)
    assert deployment.outputs["node_role_arn"] == arn
    assert deployment.outputs["node_role_name"] == "eks-node-group-role"
    profile = deployment.get(PROFILE, "karpy-instance-profile").inputs
    assert profile["role"] == "eks-node-group-role"
    assert deployment.outputs["instance_profile_name"] == profile["name"]
    pass_role = json.loads(deployment.get(POLICY, "karpy-controller-iam-integration").inputs["policy"])["Statement"][0]
    assert pass_role["Resource"] == arn


def test_node_role_options(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            node_role=pulumi_karpy_args.NodeRoleArgs(
                name="KarpyNode-demo", path="/karpy/", ipv6=True, extra_policy_arns={"s3": "arn:aws:iam::aws:policy/S3"}
            ),
            controller_role=pulumi_karpy_args.ControllerRoleArgs(
                permissions_boundary_arn=f"arn:aws:iam::{ACCOUNT}:policy/boundary",
                extra_statements=[{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}],
                extra_policy_arns={"ro": "arn:aws:iam::aws:policy/ReadOnlyAccess"},
            ),
        ),
        partition="aws-us-gov",
    )
    node = deployment.get(ROLE, "karpy-node").inputs
    assert (node["name"], node["path"]) == ("KarpyNode-demo", "/karpy/")
    trust = json.loads(node["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    attachments = {
        r.name: r.inputs["policyArn"] for r in deployment.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    }
    assert "karpy-node-cni" not in attachments  # IPv6: the IPv4 CNI policy is replaced
    assert attachments["karpy-node-worker"] == "arn:aws-us-gov:iam::aws:policy/AmazonEKSWorkerNodePolicy"
    assert attachments["karpy-node-cni-ipv6"].endswith(
        ":policy/" + deployment.get(POLICY, "karpy-node-cni-ipv6").inputs["name"]
    )
    assert attachments["karpy-node-extra-s3"] == "arn:aws:iam::aws:policy/S3"
    assert attachments["karpy-controller-attach-ro"] == "arn:aws:iam::aws:policy/ReadOnlyAccess"
    controller = deployment.get(ROLE, "karpy-controller").inputs
    assert controller["permissionsBoundary"] == f"arn:aws:iam::{ACCOUNT}:policy/boundary"
    extra = json.loads(deployment.get(POLICY, "karpy-controller-extra").inputs["policy"])
    assert extra["Statement"] == [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}]
    lifecycle = json.loads(deployment.get(POLICY, "karpy-controller-node-lifecycle").inputs["policy"])
    assert lifecycle["Statement"][0]["Resource"][0].startswith("arn:aws-us-gov:ec2:")


def test_default_nodepool_and_nodeclass(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", default_node_pool=pulumi_karpy_args.DefaultNodePoolArgs()),
    )
    nodeclass = deployment.get(CR_NODECLASS, "karpy-default-nodeclass")
    nodepool = deployment.get(CR_NODEPOOL, "karpy-default-nodepool")
    assert nodeclass.inputs["spec"]["role"] == deployment.outputs["node_role_name"]
    assert nodeclass.inputs["spec"]["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "demo"}}]
    assert any(d.endswith("Release::karpy-controller") for d in nodeclass.dependencies)
    assert any(d.endswith("EC2NodeClass::karpy-default-nodeclass") for d in nodepool.dependencies)
    assert nodepool.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    schemas = crd_schemas()
    assert schemas, "karpy.api.crds builds no CRDs"
    for resource in (nodeclass, nodepool):  # the shipped CRDs accept what the component declares
        manifest = {**resource.inputs}
        manifest.pop("__defaults", None)
        jsonschema.validate(manifest, schemas[(manifest["apiVersion"], manifest["kind"])])


def crd_schemas() -> dict[tuple[str, str], Any]:
    """The schemas of the CRDs karpy ships, from their single source (the CRD chart renders exactly these)."""
    found = {}
    for crd in api_crds.build_crds():
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            found[key] = version["schema"]["openAPIV3Schema"]
    return found


def test_discovery_tags(pulumi_run: Run) -> None:
    def program() -> Mapping[str, Any]:
        tags = discovery.DiscoveryTags(
            "disc",
            discovery.DiscoveryTagsArgs(value="demo", subnet_ids=["subnet-a", "subnet-b"], security_group_ids=["sg-1"]),
        )
        return {"tag_ids": tags.tag_ids}

    deployment = pulumi_run(program)
    tags = {r.name: r for r in deployment.of_type("aws:ec2/tag:Tag")}
    assert sorted(tags) == ["disc-sg-0", "disc-subnet-0", "disc-subnet-1"]
    subnet_b = tags["disc-subnet-1"].inputs
    assert (subnet_b["resourceId"], subnet_b["key"], subnet_b["value"]) == (
        "subnet-b",
        "karpenter.sh/discovery",
        "demo",
    )
    assert all(t.parent.endswith("karpy:index:DiscoveryTags::disc") for t in tags.values())
    assert len(deployment.outputs["tag_ids"]) == 3
    with pytest.raises(ValueError, match="give subnet_ids and/or security_group_ids"):
        discovery.DiscoveryTags("empty", discovery.DiscoveryTagsArgs(value="demo"))


@pytest.mark.parametrize(
    ("karpenter_args", "message"),
    [
        (
            pulumi_karpy_args.KarpenterArgs(cluster_name="demo", identity_mode=pulumi_karpy_args.IdentityMode.IRSA),
            "identity_mode 'irsa' needs oidc_provider_arn",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(cluster_name="demo", oidc_provider_arn=OIDC_ARN),
            "only used with identity_mode 'irsa'",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(cluster_name="bad name"),
            "cluster_name: 'bad name' is not an EKS cluster name",
        ),
        (pulumi_karpy_args.KarpenterArgs(cluster_name="demo", cluster_endpoint="http://x"), "cluster_endpoint"),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", node_role=pulumi_karpy_args.NodeRoleArgs(create=False)
            ),
            "create=False needs existing_arn",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", node_role=pulumi_karpy_args.NodeRoleArgs(existing_arn="arn:aws:iam::1:role/x")
            ),
            "set create=False to reuse a role",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(enabled=False, name="q")
            ),
            "the queue is disabled",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(kms_data_key_reuse_period_seconds=60)
            ),
            "needs queue.kms_master_key_id",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", access=pulumi_karpy_args.AccessArgs(access_entry_type="STANDARD")
            ),
            "must be EC2_LINUX or EC2_WINDOWS",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(replicas=0)),
            "helm.replicas: 0 must be >= 1",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(chart_version="9.9.9")
            ),
            "helm.chart_version",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(charts_dir="/nonexistent")
            ),
            "no karpy-crd/Chart.yaml under /nonexistent",
        ),
        (pulumi_karpy_args.KarpenterArgs(cluster_name="demo", namespace="Kube_System"), "namespace: 'Kube_System'"),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo", controller_role=pulumi_karpy_args.ControllerRoleArgs(name="x" * 65)
            ),
            "controller_role.name",
        ),
        (
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo",
                controller_role=pulumi_karpy_args.ControllerRoleArgs(
                    extra_statements=[{"Effect": "Allow", "Action": "s3:*"}]
                ),
            ),
            "extra_statements[0]: needs Resource",
        ),
    ],
)
def test_bad_arguments_fail_before_any_resource(
    pulumi_run: Run, karpenter_args: pulumi_karpy_args.KarpenterArgs, message: str
) -> None:
    with pytest.raises(ValueError, match="invalid arguments") as caught:
        deploy(pulumi_run, karpenter_args)
    assert message in str(caught.value)


def test_long_component_names_need_explicit_resource_names(pulumi_run: Run) -> None:
    long_name = "platform-team-" + "x" * 40

    def program() -> Mapping[str, Any]:
        component.Karpenter(long_name, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
        return {}

    with pytest.raises(ValueError, match="too long for an auto-named") as caught:
        pulumi_run(program)
    assert "set controller_role.name" in str(caught.value)
    assert "set node_role.name" in str(caught.value)
    assert "queue.name" not in str(caught.value)  # 80 characters are enough for the queue

    def explicit() -> Mapping[str, Any]:
        karpenter = component.Karpenter(
            long_name,
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo",
                controller_role=pulumi_karpy_args.ControllerRoleArgs(name="demo-karpy-controller"),
                node_role=pulumi_karpy_args.NodeRoleArgs(name="demo-karpy-node"),
            ),
        )
        return {"role": karpenter.controller_role_name}

    assert pulumi_run(explicit).outputs["role"] == "demo-karpy-controller"


def test_bad_arguments_declare_nothing(pulumi_run: Run) -> None:
    declared: list[str] = []

    def program() -> Mapping[str, Any]:
        try:
            component.Karpenter(
                "karpy",
                pulumi_karpy_args.KarpenterArgs(cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(replicas=0)),
            )
        except ValueError as exc:
            declared.append(str(exc))
        return {}

    deployment = pulumi_run(program)
    assert declared
    assert deployment.resources == []


def test_every_problem_is_reported_at_once() -> None:
    problems = pulumi_karpy_spec.validate(
        pulumi_karpy_spec.resolve(
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo",
                identity_mode=pulumi_karpy_args.IdentityMode.IRSA,
                helm=pulumi_karpy_args.HelmArgs(log_level="loud"),
            )
        )
    )
    assert problems == [
        "identity_mode 'irsa' needs oidc_provider_arn",
        "identity_mode 'irsa' needs oidc_issuer_url",
        "helm.log_level: 'loud' is not one of debug, info, warning, error",
    ]


CRD_PATCH = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch"
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_crds_install_by_default_and_are_kept(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    assert deployment.of_type(CRD_PATCH) == []
    crd = deployment.get(RELEASE, "karpy-crd")
    values = yaml.safe_load((Path(crd.inputs["chart"]) / "values.yaml").read_text())
    assert values["keep"] is True  # destroying the stack leaves the CRDs and every object stored under them


def test_crds_adopted_from_upstream_get_the_releases_ownership_first(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", crds=pulumi_karpy_args.CrdMode.ADOPT)
    )
    patches = {p.inputs["metadata"]["name"]: p for p in deployment.of_type(CRD_PATCH)}
    assert sorted(patches) == sorted(crd["metadata"]["name"] for crd in api_crds.build_crds())
    for patch in patches.values():
        assert patch.parent.endswith(COMPONENT_URN_SUFFIX)
        assert patch.inputs["metadata"]["annotations"] == {
            "meta.helm.sh/release-name": "karpy-crd",
            "meta.helm.sh/release-namespace": "kube-system",
            "helm.sh/resource-policy": "keep",
            "pulumi.com/patchForce": "true",
        }
        assert patch.inputs["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Helm"}
        assert "spec" not in patch.inputs  # metadata only: the release brings karpy's schema
    crd = deployment.get(RELEASE, "karpy-crd")
    assert {d.rsplit("::", 1)[1] for d in crd.dependencies} >= {p.name for p in deployment.of_type(CRD_PATCH)}
    controller = deployment.get(RELEASE, "karpy-controller")
    assert any(d.endswith(f"{RELEASE}::karpy-crd") for d in controller.dependencies)


def test_crds_skipped_leave_the_crds_to_their_owner(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", crds=pulumi_karpy_args.CrdMode.SKIP)
    )
    assert [r.name for r in deployment.of_type(RELEASE)] == ["karpy-controller"]
    assert deployment.of_type(CRD_PATCH) == []
    assert deployment.get(RELEASE, "karpy-controller").inputs["skipCrds"] is True


def test_crd_names_are_the_charts() -> None:
    assert sorted(charts.CRD_NAMES) == sorted(crd["metadata"]["name"] for crd in api_crds.build_crds())
