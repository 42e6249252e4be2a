"""The component's arguments as a program really passes them: Outputs of other resources inside `helm.values` (or
the whole of it), the region of the caller's AWS provider, and the namespace the releases need."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
import yaml

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import component

from .conftest import REGION, Deployment, Run

RELEASE = "kubernetes:helm.sh/v3:Release"


def deploy_with(run: Run, make_args: Any) -> Deployment:
    """Deploy the component with the arguments `make_args(cluster, node_group)` builds from two other resources of
    the same program (an EKS cluster and a managed node group), as a user's program would."""

    def program() -> Mapping[str, Any]:
        aws_provider = aws.Provider("aws", region=REGION)
        k8s_provider = k8s.Provider("k8s", kubeconfig="{}")
        providers = pulumi.ResourceOptions(providers=[aws_provider, k8s_provider])
        cluster = aws.eks.Cluster("demo", name="demo", role_arn="arn:aws:iam::1:role/eks", vpc_config={})
        node_group = aws.eks.NodeGroup(
            "system",
            cluster_name=cluster.name,
            node_role_arn="arn:aws:iam::1:role/nodes",
            subnet_ids=["subnet-a"],
            scaling_config={"desired_size": 2, "max_size": 3, "min_size": 2},
            labels={"role": "system"},
        )
        karpenter = component.Karpenter("karpy", make_args(cluster, node_group), opts=providers)
        return {"namespace": karpenter.namespace}

    return run(program)


def releases(deployment: Deployment) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in deployment.of_type(RELEASE)}


def test_outputs_nested_in_helm_values_reach_the_release(pulumi_run: Run) -> None:
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name=cluster.name,
            helm=pulumi_karpy_args.HelmArgs(
                values={
                    "settings": {"clusterCABundle": cluster.certificate_authority.data, "batchMaxDuration": "20s"},
                    "nodeSelector": node_group.labels,
                    "tolerations": [{"key": node_group.id, "operator": "Exists"}],
                }
            ),
        ),
    )
    values = releases(deployment)["karpy-controller"]["values"]
    assert values["settings"]["clusterCABundle"] == "Q0E="  # the cluster's CA bundle, resolved
    assert values["settings"]["batchMaxDuration"] == "20s"
    assert values["settings"]["clusterName"] == "demo"  # merged with the component's own settings
    assert values["settings"]["awsRegion"] == REGION
    # another resource's labels, beside the architecture the single-platform image it builds pins
    assert values["nodeSelector"] == {"role": "system", "kubernetes.io/arch": "amd64"}
    assert values["tolerations"] == [{"key": "system-id", "operator": "Exists"}]  # an Output inside a list


def test_helm_values_as_one_output(pulumi_run: Run) -> None:
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            helm=pulumi_karpy_args.HelmArgs(
                values=node_group.labels.apply(lambda found: {"nodeSelector": found, "replicas": 5})
            ),
        ),
    )
    values = releases(deployment)["karpy-controller"]["values"]
    assert values["nodeSelector"] == {"role": "system", "kubernetes.io/arch": "amd64"}
    assert values["replicas"] == 2  # the component's value still wins over the user's
    assert values["settings"]["clusterName"] == "demo"


def test_the_region_of_the_callers_aws_provider_reaches_the_controller(pulumi_run: Run) -> None:
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(values={"settings": {"awsRegion": "eu-west-1"}})
        ),
    )
    # AWS_REGION of the controller is the region every other resource of the stack was created in
    assert releases(deployment)["karpy-controller"]["values"]["settings"]["awsRegion"] == REGION


@pytest.mark.parametrize(
    ("namespace", "create", "crds", "created"),
    [
        ("kube-system", None, "install", False),  # every cluster has it
        ("karpy", None, "install", True),
        ("karpy", None, "skip", True),  # no CRD release: the controller release creates it
        ("karpy", False, "install", False),  # as asked (e.g. the namespace is someone else's)
        ("kube-system", True, "install", True),
    ],
)
def test_a_namespace_other_than_kube_system_is_created(
    pulumi_run: Run, namespace: str, create: bool | None, crds: str, created: bool
) -> None:
    helm = pulumi_karpy_args.HelmArgs() if create is None else pulumi_karpy_args.HelmArgs(create_namespace=create)
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo", namespace=namespace, helm=helm, crds=pulumi_karpy_args.CrdMode(crds)
        ),
    )
    found = releases(deployment)
    for name, inputs in found.items():
        assert inputs["namespace"] == namespace
        assert inputs.get("createNamespace", False) is created, name
    assert set(found) == ({"karpy-controller"} if crds == "skip" else {"karpy-crd", "karpy-controller"})


def test_a_node_policy_the_role_already_has_is_refused() -> None:
    with pytest.raises(ValueError, match=r"node_role.extra_policy_arns.ssm: .*already gets"):
        component._resolved(
            "karpy",
            pulumi_karpy_args.KarpenterArgs(
                cluster_name="demo",
                node_role=pulumi_karpy_args.NodeRoleArgs(
                    extra_policy_arns={"ssm": "arn:aws-us-gov:iam::aws:policy/AmazonSSMManagedInstanceCore"}
                ),
                image=pulumi_karpy_args.ImageArgs(reference="example.com/karpy:1"),
            ),
        )


def test_the_controller_release_waits_until_the_controller_is_ready(pulumi_run: Run) -> None:
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(timeout_seconds=420)
        ),
    )
    controller = releases(deployment)["karpy-controller"]
    # pulumi-kubernetes' Release: Helm's wait is on unless skipAwait (provider/pkg/provider/helm_release.go), and
    # the install fails, rolled back, when the pods are not Ready within the timeout
    assert controller.get("skipAwait", False) is False
    assert controller["atomic"] is True
    assert controller["timeout"] == 420
    # on destroy, the chart's pre-delete teardown gives up (naming what is left) before Helm stops waiting for it
    assert controller["values"]["teardown"] == {"timeout": "390s"}


def test_outputs_inside_statements_map_roles_and_tags_are_resolved(pulumi_run: Run) -> None:
    deployment = deploy_with(
        pulumi_run,
        lambda cluster, node_group: pulumi_karpy_args.KarpenterArgs(
            cluster_name=cluster.name,
            cluster_endpoint=cluster.endpoint,
            controller_role=pulumi_karpy_args.ControllerRoleArgs(
                extra_statements=[{"Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": cluster.arn}]
            ),
            queue=pulumi_karpy_args.QueueArgs(
                policy_statements=[
                    {"Effect": "Allow", "Action": "sqs:SendMessage", "Principal": {"AWS": node_group.node_role_arn}}
                ]
            ),
            access=pulumi_karpy_args.AccessArgs(
                mode=pulumi_karpy_args.AccessMode.AWS_AUTH,
                aws_auth_map_roles=[
                    {"rolearn": node_group.node_role_arn, "username": "system:node:{{EC2PrivateDNSName}}"}
                ],
            ),
            tags={"cluster": cluster.name},
        ),
    )
    arn = f"arn:aws:eks:{REGION}:123456789012:cluster/demo"
    extra = json.loads(deployment.get("aws:iam/policy:Policy", "karpy-controller-extra").inputs["policy"])
    assert extra["Statement"] == [{"Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": arn}]
    queue_policy = json.loads(deployment.get("aws:sqs/queuePolicy:QueuePolicy", "karpy-queue-policy").inputs["policy"])
    assert queue_policy["Statement"][-1]["Principal"] == {"AWS": "arn:aws:iam::1:role/nodes"}
    map_roles = yaml.safe_load(
        deployment.get("kubernetes:core/v1:ConfigMapPatch", "karpy-aws-auth").inputs["data"]["mapRoles"]
    )
    assert map_roles[0]["rolearn"] == "arn:aws:iam::1:role/nodes"
    assert deployment.get("aws:iam/role:Role", "karpy-node").inputs["tags"] == {"cluster": "demo"}
    values = releases(deployment)["karpy-controller"]["values"]
    assert values["settings"]["clusterEndpoint"] == f"https://demo.gr7.{REGION}.eks.amazonaws.com"
