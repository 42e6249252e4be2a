"""pulumi_karpy: the Pulumi component that deploys karpy and everything it needs as one versioned stack.

Must not import kopf or the controller runtime; only pulumi, pulumi-aws and pulumi-kubernetes.
"""
