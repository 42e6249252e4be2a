"""The component as a library: your program owns the providers (another region, an assumed role, a specific
kubeconfig) and passes them in; the component never creates providers or reads a kubeconfig of its own.

This example uses IRSA (e.g. a cluster whose controller runs on Fargate, where Pod Identity is unavailable) and
builds its own NodePools from the component's outputs.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args, component


def main() -> dict[str, Any]:
    config = pulumi.Config()
    cluster_name = config.require("clusterName")
    role = config.get("targetRoleArn")
    aws_provider = aws.Provider(
        "platform-aws",
        region=pulumi.Config("aws").get("region") or "us-west-2",
        assume_roles=[{"role_arn": role, "session_name": "karpy"}] if role else None,
    )
    k8s_provider = k8s.Provider("platform-k8s", kubeconfig=config.get("kubeconfig") or None)
    providers = pulumi.ResourceOptions(providers=[aws_provider, k8s_provider])

    karpenter = component.Karpenter(
        "autoscaling",
        args.KarpenterArgs(
            cluster_name=cluster_name,
            identity_mode=args.IdentityMode.IRSA,
            oidc_provider_arn=config.require("oidcProviderArn"),
            oidc_issuer_url=config.require("oidcIssuerUrl"),
            namespace="karpy",
            controller_role=args.ControllerRoleArgs(path="/platform/"),
            node_role=args.NodeRoleArgs(
                # The node role already has upstream's four (SSM included); add only what your nodes need beyond them.
                extra_policy_arns={"cloudwatch": "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"}
            ),
            helm=args.HelmArgs(values={"settings": {"featureGates": {"nodeRepair": True}}}),  # creates "karpy"
            tags={"team": "platform"},
            # Outside this repository there is no Dockerfile to build: run a published image.
            image=args.ImageArgs(reference=image) if (image := config.get("imageReference")) else args.ImageArgs(),
        ),
        opts=providers,
    )
    # Your own node classes and pools, wired from the component's outputs.
    nodeclass = k8s.apiextensions.CustomResource(
        "batch-nodeclass",
        api_version="karpenter.k8s.aws/v1",
        kind="EC2NodeClass",
        metadata={"name": "batch"},
        spec={
            "role": karpenter.node_role_name,
            "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster_name}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster_name}}],
        },
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[karpenter]),
    )
    k8s.apiextensions.CustomResource(
        "batch-nodepool",
        api_version="karpenter.sh/v1",
        kind="NodePool",
        metadata={"name": "batch"},
        spec={
            "template": {
                "metadata": {"labels": {"workload": "batch"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "batch"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                    "taints": [{"key": "workload", "value": "batch", "effect": "NoSchedule"}],
                },
            },
            "limits": {"cpu": "200"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        },
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[nodeclass]),
    )
    return {
        "controllerRoleArn": karpenter.controller_role_arn,
        "queueUrl": karpenter.queue_url,
        "ruleNames": karpenter.rule_names,
    }


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
