"""The root stack: karpy on an existing EKS cluster, configured with `pulumi config set karpy:clusterName <name>`.

    pulumi config set aws:region us-west-2
    pulumi config set karpy:clusterName my-cluster
    pulumi up

Explicit providers: the AWS provider takes `aws:region` from stack config, the Kubernetes provider the
`karpy:kubeconfig` value (or the ambient kubeconfig), and both are handed to the component.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args, component


def main() -> dict[str, Any]:
    config = pulumi.Config("karpy")
    mode = args.IdentityMode(config.get("identityMode") or "pod_identity")
    karpenter_args = args.KarpenterArgs(
        cluster_name=config.require("clusterName"),
        identity_mode=mode,
        namespace=config.get("namespace") or "kube-system",
        queue=args.QueueArgs(enabled=config.get_bool("interruptionQueue") is not False),
        tags={"app.kubernetes.io/managed-by": "pulumi", "karpy/stack": pulumi.get_stack()},
    )
    # Empty config values mean "unset": the key is left out.
    if endpoint := config.get("clusterEndpoint"):
        karpenter_args["cluster_endpoint"] = endpoint
    if oidc_arn := config.get("oidcProviderArn"):
        karpenter_args["oidc_provider_arn"] = oidc_arn
    if issuer := config.get("oidcIssuerUrl"):
        karpenter_args["oidc_issuer_url"] = issuer
    if reference := config.get("imageReference"):
        karpenter_args["image"] = args.ImageArgs(reference=reference)
    if config.get_bool("defaultNodePool"):
        karpenter_args["default_node_pool"] = args.DefaultNodePoolArgs()
    aws_provider = aws.Provider("aws", region=pulumi.Config("aws").get("region"))
    k8s_provider = k8s.Provider("kubernetes", kubeconfig=config.get("kubeconfig") or None)
    karpenter = component.Karpenter(
        "karpy", karpenter_args, opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider])
    )
    return {
        "controllerRoleArn": karpenter.controller_role_arn,
        "nodeRoleName": karpenter.node_role_name,
        "nodeRoleArn": karpenter.node_role_arn,
        "queueName": karpenter.queue_name,
        "queueUrl": karpenter.queue_url,
        "ruleNames": karpenter.rule_names,
        "namespace": karpenter.namespace,
        "serviceAccount": karpenter.service_account,
        "releaseStatus": karpenter.release_status,
        "imageRef": karpenter.image_ref,
    }


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
