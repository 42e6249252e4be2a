"""pulumi_karpy: the Pulumi component that deploys karpy and everything it needs as one versioned stack.

Must not import kopf or the controller runtime; only pulumi, pulumi-aws and pulumi-kubernetes (and
`karpy.__version__`, so the stack has one version).

    from pulumi_karpy import component, args
    component.Karpenter("karpy", args.KarpenterArgs(cluster_name="demo"), opts=pulumi.ResourceOptions(
        providers=[aws_provider, k8s_provider]))
"""

from pulumi_karpy.args import VERSION as VERSION
