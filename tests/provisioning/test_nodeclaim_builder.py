"""build_nodeclaim: the NodeClaim manifest a plan becomes, field by field (upstream ToNodeClaim/FinalizeScheduling)."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.scheduling.conftest import make_instance_type

from karpy import requirements
from karpy.api import hashing, labels, parse, quantity
from karpy.provisioning import nodeclaim_builder
from karpy.scheduling import results

BOTH = (labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT)


def _plan(**overrides: Any) -> results.PlannedNodeClaim:
    reqs = requirements.Requirements(
        [
            requirements.Requirement.in_(labels.LABEL_NODEPOOL, ["general"]),
            requirements.Requirement.in_("team", ["a"]),  # template label, pinned
            requirements.Requirement.in_("example.com/tier", ["web"]),  # pod selector, pinned: becomes a label
            requirements.Requirement.in_("example.com/multi", ["x", "y"]),  # two values: not a label
            requirements.Requirement.in_("node.kubernetes.io/role", ["edge"]),  # allowed subdomain: a label
            requirements.Requirement.in_(labels.LABEL_ZONE, ["zone-a"]),  # well-known: the provider's to set
            requirements.Requirement.in_(labels.LABEL_CAPACITY_TYPE, list(BOTH)),
            requirements.Requirement.in_(labels.LABEL_HOSTNAME, ["hostname-placeholder-0001"]),
        ]
    )
    options = (
        # names sort like prices, so spec.requirements' sorted values read cheapest first
        make_instance_type("a-small", cpu=2, memory_gib=4, price=0.1, zones=("zone-a",), capacity_types=("on-demand",)),
        make_instance_type("b-medium", cpu=4, memory_gib=8, price=0.2, zones=("zone-a", "zone-b"), capacity_types=BOTH),
        make_instance_type("c-large", cpu=8, memory_gib=16, price=0.4, zones=("zone-a",), capacity_types=("spot",)),
    )
    fields: dict[str, Any] = {
        "nodepool": "general",
        "requirements": reqs,
        "instance_type_options": options,
        "pods": (),
        "requests": {labels.RESOURCE_CPU: 1500, labels.RESOURCE_MEMORY: 2 * quantity.GI, labels.RESOURCE_PODS: 3000},
        "cheapest": results.CheapestOffering("a-small", "zone-a", "on-demand", 0.1),
    }
    fields.update(overrides)
    return results.PlannedNodeClaim(**fields)


POOL = builders.parsed_nodepool(
    "general",
    uid="pool-uid-1",
    labels={"team": "a"},
    template_annotations={"example.com/owner": "me"},
    taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
    template_spec={
        "startupTaints": [{"key": "example.com/booting", "effect": "NoSchedule"}],
        "expireAfter": "24h",
        "terminationGracePeriod": "1h",
    },
    requirements=[],
)


def test_full_manifest() -> None:
    got = nodeclaim_builder.build_nodeclaim(_plan(), POOL)
    assert got == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": "general-",
            "labels": {
                "team": "a",
                labels.LABEL_NODEPOOL: "general",
                "example.com/tier": "web",
                "node.kubernetes.io/role": "edge",
            },
            "annotations": {
                "example.com/owner": "me",
                labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(POOL),
                labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
            },
            "finalizers": [labels.FINALIZER_TERMINATION],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": "general",
                    "uid": "pool-uid-1",
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            # keys sorted; hostname placeholder gone; instance types = all three options; capacity types = those
            # the options offer in zone-a (a: on-demand, b: both, c: spot)
            "requirements": [
                {"key": "example.com/multi", "operator": "In", "values": ["x", "y"]},
                {"key": "example.com/tier", "operator": "In", "values": ["web"]},
                {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]},
                {"key": labels.LABEL_NODEPOOL, "operator": "In", "values": ["general"]},
                {"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["a-small", "b-medium", "c-large"]},
                {"key": "node.kubernetes.io/role", "operator": "In", "values": ["edge"]},
                {"key": "team", "operator": "In", "values": ["a"]},
                {"key": labels.LABEL_ZONE, "operator": "In", "values": ["zone-a"]},
            ],
            "expireAfter": "24h",
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/booting", "effect": "NoSchedule"}],
            "terminationGracePeriod": "1h",
            "resources": {"requests": {"cpu": "1500m", "memory": "2Gi", "pods": "3"}},
        },
    }


def test_manifest_parses_back_as_a_valid_nodeclaim() -> None:
    body = nodeclaim_builder.build_nodeclaim(_plan(), POOL)
    body["metadata"]["name"] = "general-x7k2p"  # what the API server fills in from generateName
    claim = parse.nodeclaim(body)
    assert claim.spec.resources[labels.RESOURCE_CPU] == 1500
    assert claim.spec.termination_grace_period == 3600.0


def test_truncates_to_cheapest_and_narrows_capacity_types() -> None:
    got = nodeclaim_builder.build_nodeclaim(_plan(), POOL, max_instance_types=1)
    reqs = {r["key"]: r["values"] for r in got["spec"]["requirements"]}
    assert reqs[labels.LABEL_INSTANCE_TYPE] == ["a-small"]
    assert reqs[labels.LABEL_CAPACITY_TYPE] == ["on-demand"]  # a-small has no spot offering


def test_optional_annotations() -> None:
    got = nodeclaim_builder.build_nodeclaim(_plan(min_values_relaxed=True), POOL, nodeclass_hash="abc123")
    ann = got["metadata"]["annotations"]
    assert ann[labels.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] == "true"
    assert ann[labels.ANNOTATION_EC2NODECLASS_HASH] == "abc123"
    assert ann[labels.ANNOTATION_EC2NODECLASS_HASH_VERSION] == labels.EC2NODECLASS_HASH_VERSION
    plain = nodeclaim_builder.build_nodeclaim(_plan(), POOL)["metadata"]["annotations"]
    assert labels.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED not in plain
    assert labels.ANNOTATION_EC2NODECLASS_HASH not in plain


def test_pool_without_uid_and_minimal_template() -> None:
    pool = builders.parsed_nodepool("bare", requirements=[])
    got = nodeclaim_builder.build_nodeclaim(_plan(nodepool="bare"), pool)
    assert got["metadata"]["ownerReferences"] == [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "bare", "blockOwnerDeletion": True}
    ]
    assert "taints" not in got["spec"]
    assert "terminationGracePeriod" not in got["spec"]
    assert got["spec"]["expireAfter"] == "720h"  # the v1 default


def test_template_label_cannot_be_overridden_by_nodepool_label() -> None:
    pool = builders.parsed_nodepool("general", labels={"team": "a"}, requirements=[])
    got = nodeclaim_builder.build_nodeclaim(_plan(), pool)
    assert got["metadata"]["labels"][labels.LABEL_NODEPOOL] == "general"


def test_plan_for_another_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="not 'general'"):
        nodeclaim_builder.build_nodeclaim(_plan(nodepool="other"), POOL)


@pytest.mark.parametrize(
    ("key", "restricted"),
    [
        ("team", False),  # no domain
        ("example.com/tier", False),  # custom domain
        (labels.LABEL_ZONE, True),  # well-known: set by the cloud provider
        (labels.LABEL_NODEPOOL, True),  # well-known (the builder adds it itself)
        (labels.LABEL_HOSTNAME, True),  # restricted label
        ("node.kubernetes.io/role", False),  # kubernetes.io and k8s.io are the user's since upstream v1.10
        ("kops.k8s.io/instancegroup", False),
        ("sub.k8s.io/x", False),
        ("karpenter.sh/custom", True),  # restricted domain
        ("sub.karpenter.k8s.aws/x", True),  # subdomain of a restricted domain
        ("karpenter.sh/nodeclaim", True),  # restricted label
    ],
)
def test_is_restricted_node_label(key: str, restricted: bool) -> None:
    assert nodeclaim_builder.is_restricted_node_label(key) is restricted
