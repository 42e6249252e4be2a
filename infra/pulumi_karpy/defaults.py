"""Pure builders for the optional default EC2NodeClass and NodePool (upstream getting-started shapes)."""

from __future__ import annotations

from typing import Any, Final

from pulumi_karpy import spec as pulumi_karpy_spec

DELETION_POLICY_ANNOTATION: Final = "pulumi.com/deletionPropagationPolicy"
"""pulumi-kubernetes (>= 4.12) deletes with this propagation policy and waits for the object to be gone."""


def ec2nodeclass_spec(
    pool: pulumi_karpy_spec.DefaultNodePool, *, role: object, discovery_value: object
) -> dict[str, Any]:
    """`role` and `discovery_value` may be pulumi Outputs (the node role name, the cluster name)."""
    selector = [{"tags": {pool.discovery_tag_key: discovery_value}}]
    return {
        "role": role,
        "amiSelectorTerms": [{"alias": pool.ami_alias}],
        "subnetSelectorTerms": selector,
        "securityGroupSelectorTerms": selector,
    }


def nodepool_spec(pool: pulumi_karpy_spec.DefaultNodePool) -> dict[str, Any]:
    return {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.name},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(pool.capacity_types)},
                    {
                        "key": "karpenter.k8s.aws/instance-category",
                        "operator": "In",
                        "values": list(pool.instance_categories),
                    },
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
                ],
                # Upstream's default: replace nodes monthly so AMIs and kernels do not go stale.
                "expireAfter": "720h",
            }
        },
        "limits": {"cpu": pool.cpu_limit},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": pool.consolidate_after},
    }
