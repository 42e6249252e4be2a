"""NodeClaim parsing (core: pkg/apis/v1/nodeclaim.go) and the NodePool status (nodepool_status.go): every field is
accepted and read, the requirement rules apply with NodeClaim's key restrictions (karpenter.sh/nodepool is
allowed), exact messages."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.api import builders as api_builders

from karpy.api import errors, meta, nodeclaim, parse, quantity

CONDITION = {"status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}


def problems_of(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(errors.ValidationError) as info:
        parse.nodeclaim(obj)
    return [str(p) for p in info.value.problems]


def test_every_field_is_read() -> None:
    obj = builders.nodeclaim(
        "default-abcde",
        spec=dict(
            taints=[{"key": "example.com/gpu", "effect": "NoSchedule", "value": "true"}],
            startupTaints=[{"key": "example.com/init", "effect": "NoExecute"}],
            resources={"requests": {"cpu": "1500m", "memory": "2Gi", "pods": "3"}},
            terminationGracePeriod="30m",
            expireAfter="Never",
        ),
    )
    obj["metadata"].update(
        {
            "generateName": "default-",
            "labels": {"karpenter.sh/nodepool": "default"},
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": "default",
                    "uid": "u1",
                    "blockOwnerDeletion": True,
                }
            ],
        }
    )
    obj["status"] = {
        "nodeName": "ip-10-0-0-1.ec2.internal",
        "providerID": "aws:///us-west-2a/i-0123",
        "imageID": "ami-0123",
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        "lastPodEventTime": "2024-01-01T00:05:00Z",
        "conditions": [{"type": t, **CONDITION} for t in ("Launched", "Registered", "Initialized", "Ready")],
    }
    claim = parse.nodeclaim(obj)
    s = claim.spec
    assert s.taints == (meta.Taint("example.com/gpu", "NoSchedule", "true"),)
    assert s.startup_taints == (meta.Taint("example.com/init", "NoExecute"),)
    assert s.resources == {"cpu": 1500, "memory": 2 * quantity.GI, "pods": 3000}
    assert s.termination_grace_period == 1800
    assert s.expire_after is None
    assert claim.metadata.finalizers == ("karpenter.sh/termination",)
    st = claim.status
    assert (st.node_name, st.provider_id, st.image_id) == (
        "ip-10-0-0-1.ec2.internal",
        "aws:///us-west-2a/i-0123",
        "ami-0123",
    )
    assert st.allocatable["cpu"] == 1930
    assert st.last_pod_event_time == 1704067500.0
    assert claim.is_true(nodeclaim.INITIALIZED)


def test_defaults() -> None:
    claim = parse.nodeclaim(builders.nodeclaim("default-abcde"))
    assert claim.spec.expire_after == 720 * 3600
    assert claim.spec.termination_grace_period is None
    assert claim.spec.resources == {}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"requirements": [{"key": "a.io/x", "operator": "In", "values": []}]},
            "spec.requirements: requirements with operator 'In' must have a value defined",
        ),
        (
            {"requirements": [{"key": "a.io/x", "operator": "Gte", "values": ["-1"]}]},
            "spec.requirements: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive "
            "integer value",
        ),
        (
            {"requirements": [{"key": "a.io/x", "operator": "In", "values": ["a"], "minValues": 2}]},
            "spec.requirements: requirements with 'minValues' must have at least that many values specified in the "
            "'values' field",
        ),
        (
            {"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]},
            'spec.requirements[0].key: label "kubernetes.io/hostname" is restricted',
        ),
        (
            {"requirements": [{"key": "karpenter.sh/foo", "operator": "Exists"}]},
            'spec.requirements[0].key: label domain "karpenter.sh" is restricted',
        ),
        ({"requirements": None}, "spec.requirements: Required value"),
        (
            {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "", "name": "x"}},
            "spec.nodeClassRef.kind: kind may not be empty",
        ),
        ({"expireAfter": "30d"}, "spec.expireAfter: invalid value"),
        ({"terminationGracePeriod": "Never"}, "spec.terminationGracePeriod: invalid value"),
        ({"resources": {"requests": {"cpu": "one"}}}, "spec.resources.requests[cpu]: invalid value"),
    ],
)
def test_rules(spec: dict[str, Any], expected: str) -> None:
    obj = builders.nodeclaim("default-abcde")
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key)
        else:
            obj["spec"][key] = value
    problems = problems_of(obj)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


def test_nodepool_label_is_allowed_in_nodeclaim_requirements_only() -> None:
    claim = parse.nodeclaim(builders.nodeclaim("default-abcde"))
    assert claim.spec.requirements[0].key == "karpenter.sh/nodepool"
    pool = api_builders.with_template_spec(
        builders.nodepool(), requirements=[{"key": "karpenter.sh/nodepool", "operator": "Exists"}]
    )
    with pytest.raises(errors.ValidationError) as info:
        parse.nodepool(pool)
    assert 'spec.template.spec.requirements[0].key: label "karpenter.sh/nodepool" is restricted' in [
        str(p) for p in info.value.problems
    ]


def test_nodepool_status_and_replicas_are_read() -> None:
    obj = builders.nodepool(replicas=3, limits={"nodes": "5"})
    obj["status"] = {
        "resources": {"cpu": "8", "memory": "32Gi", "nodes": "3"},
        "nodes": 3,
        "nodeClassObservedGeneration": 4,
        "conditions": [
            {"type": t, **CONDITION}
            for t in ("ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy", "Ready")
        ],
    }
    pool = parse.nodepool(obj)
    assert pool.replicas == 3
    assert pool.limits == {"nodes": 5000}
    assert pool.status.resources == {"cpu": 8000, "memory": 32 * quantity.GI, "nodes": 3000}
    assert pool.status.nodes == 3
    assert pool.status.node_class_observed_generation == 4
    assert [c.type for c in pool.status.conditions][-1] == "Ready"
