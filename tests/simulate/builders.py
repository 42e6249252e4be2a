"""Manifests shared by the `karpy simulate` tests."""

from __future__ import annotations

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def pool_manifest(*requirements: str) -> str:
    """NodePool "default" of the EC2NodeClass "default" with these requirements (one YAML flow mapping each)."""
    lines = "".join(f"        - {requirement}\n" for requirement in requirements)
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
{lines}"""


POOL = pool_manifest("{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}")
NODEPOOL = NODECLASS + "---\n" + POOL


def pod_manifest(name: str, *, cpu: str = "1", extra_spec: str = "", resources: str = "") -> str:
    """A Pod requesting `cpu` and 1Gi, or `resources` (its container's resources, a YAML flow mapping) instead."""
    resources = resources or f'{{requests: {{cpu: "{cpu}", memory: 1Gi}}}}'
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers: [{{name: c, image: busybox, resources: {resources}}}]
{extra_spec}"""
