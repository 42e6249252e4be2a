"""NodePool parsing: every field and default of core: pkg/apis/v1/nodepool.go, every CEL rule both ways, all problems
at once."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.api import builders as api_builders

from karpy.api import errors, meta, nodepool, parse, quantity


def problems_of(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(errors.ValidationError) as info:
        parse.nodepool(manifest)
    return [str(p) for p in info.value.problems]


def test_defaults_are_upstreams() -> None:
    pool = parse.nodepool(builders.nodepool())
    assert pool.name == "default"
    assert pool.template.expire_after == 720 * 3600
    assert pool.template.termination_grace_period is None
    assert pool.disruption.consolidation_policy is nodepool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    assert pool.disruption.consolidate_after == 0.0
    assert pool.disruption.budgets == (nodepool.Budget(nodes="10%"),)
    assert pool.limits == {}
    assert pool.weight is None
    assert pool.replicas is None
    assert pool.template.node_class_ref == meta.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")


def test_every_field_is_read() -> None:
    manifest = builders.nodepool(
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "1h30m",
            "budgets": [
                {"nodes": "20%", "reasons": ["Empty", "Drifted"]},
                {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
            ],
        },
        limits={"cpu": "100", "memory": "400Gi", "nodes": 10},
        weight=50,
    )
    manifest["spec"]["template"]["metadata"] = {"labels": {"team": "a"}, "annotations": {"example.com/x": "y"}}
    manifest = api_builders.with_template_spec(
        manifest,
        requirements=[
            {
                "key": "karpenter.k8s.aws/instance-family",
                "operator": "In",
                "values": ["m5", "m6i", "c5"],
                "minValues": 2,
            },
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
            {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
            {"key": "example.com/gpu", "operator": "DoesNotExist"},
            {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
        ],
        taints=[{"key": "example.com/special", "value": "true", "effect": "NoSchedule"}],
        startupTaints=[{"key": "example.com/init", "effect": "NoExecute"}],
        expireAfter="Never",
        terminationGracePeriod="48h",
    )
    pool = parse.nodepool(manifest)
    t = pool.template
    assert t.labels == {"team": "a"}
    assert t.annotations == {"example.com/x": "y"}
    assert t.requirements[0] == meta.NodeSelectorRequirement(
        "karpenter.k8s.aws/instance-family", meta.Operator.IN, ("m5", "m6i", "c5"), 2
    )
    assert [r.operator for r in t.requirements] == [
        meta.Operator.IN, meta.Operator.GTE, meta.Operator.GT, meta.Operator.NOT_IN,
        meta.Operator.DOES_NOT_EXIST, meta.Operator.EXISTS,
    ]  # fmt: skip
    assert t.taints == (meta.Taint("example.com/special", "NoSchedule", "true"),)
    assert t.startup_taints == (meta.Taint("example.com/init", "NoExecute"),)
    assert t.expire_after is None
    assert t.termination_grace_period == 48 * 3600
    d = pool.disruption
    assert d.consolidation_policy is nodepool.ConsolidationPolicy.WHEN_EMPTY
    assert d.consolidate_after == 5400
    assert d.budgets == (
        nodepool.Budget(nodes="20%", reasons=(nodepool.DisruptionReason.EMPTY, nodepool.DisruptionReason.DRIFTED)),
        nodepool.Budget(nodes="0", schedule="0 9 * * mon-fri", duration=8 * 3600),
    )
    assert pool.limits == {"cpu": 100_000, "memory": 400 * quantity.GI, "nodes": 10_000}
    assert pool.weight == 50


def test_consolidate_after_never_and_balanced_policy() -> None:
    pool = parse.nodepool(
        builders.nodepool(disruption={"consolidateAfter": "Never", "consolidationPolicy": "Balanced"})
    )
    assert pool.disruption.consolidate_after is None
    assert pool.disruption.consolidation_policy is nodepool.ConsolidationPolicy.BALANCED
    # budgets default even when disruption is given without them
    assert pool.disruption.budgets == (nodepool.Budget(),)


def test_unsupported_operator_is_named_with_its_path() -> None:
    manifest = api_builders.with_template_spec(
        builders.nodepool(),
        requirements=[
            {"key": "a.example.com/x", "operator": "In", "values": ["a"]},
            {"key": "b.example.com/x", "operator": "Exists"},
            {"key": "c.example.com/x", "operator": "Equals", "values": ["a"]},
        ],
    )
    [problem] = problems_of(manifest)
    assert problem.startswith('spec.template.spec.requirements[2].operator: unsupported operator "Equals"')


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        (
            {"key": "a.io/x", "operator": "In", "values": []},
            "requirements with operator 'In' must have a value defined",
        ),
        ({"key": "a.io/x", "operator": "In"}, "requirements with operator 'In' must have a value defined"),
        ({"key": "a.io/x", "operator": "Gt", "values": ["x"]}, "'Gt', 'Lt', 'Gte', or 'Lte' must have a single"),
        ({"key": "a.io/x", "operator": "Lt", "values": ["1", "2"]}, "'Gt', 'Lt', 'Gte', or 'Lte' must have a single"),
        ({"key": "a.io/x", "operator": "Gte", "values": ["-1"]}, "'Gt', 'Lt', 'Gte', or 'Lte' must have a single"),
        ({"key": "a.io/x", "operator": "Lte"}, "'Gt', 'Lt', 'Gte', or 'Lte' must have a single"),
        (
            {"key": "a.io/x", "operator": "In", "values": ["a"], "minValues": 2},
            "requirements with 'minValues' must have at least that many values",
        ),
    ],
)
def test_requirement_cel_rules_fail(requirement: dict[str, Any], message: str) -> None:
    manifest = api_builders.with_template_spec(builders.nodepool(), requirements=[requirement])
    [problem] = problems_of(manifest)
    assert problem.startswith("spec.template.spec.requirements: ")
    assert message in problem


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "a.io/x", "operator": "In", "values": ["a"]},
        {"key": "a.io/x", "operator": "NotIn", "values": []},
        {"key": "a.io/x", "operator": "Gt", "values": ["0"]},
        {"key": "a.io/x", "operator": "Lte", "values": ["7"]},
        {"key": "a.io/x", "operator": "In", "values": ["a", "b"], "minValues": 2},
        {"key": "a.io/x", "operator": "Exists", "minValues": 3},
    ],
)
def test_requirement_cel_rules_pass(requirement: dict[str, Any]) -> None:
    manifest = api_builders.with_template_spec(builders.nodepool(), requirements=[requirement])
    assert parse.nodepool(manifest).template.requirements[0].key == "a.io/x"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("kubernetes.io/hostname", 'label "kubernetes.io/hostname" is restricted'),
        ("karpenter.sh/foo", 'label domain "karpenter.sh" is restricted'),
        ("karpenter.sh/nodepool", 'label "karpenter.sh/nodepool" is restricted'),
        ("karpenter.k8s.aws/foo", 'label domain "karpenter.k8s.aws" is restricted'),
    ],
)
def test_restricted_requirement_keys(key: str, message: str) -> None:
    manifest = api_builders.with_template_spec(builders.nodepool(), requirements=[{"key": key, "operator": "Exists"}])
    problems = problems_of(manifest)
    assert f"spec.template.spec.requirements[0].key: {message}" in problems


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "beta.kubernetes.io/arch",
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/instance-family",
        "topology.k8s.aws/zone-id",
        "node-restriction.kubernetes.io/foo",
        "team.kops.k8s.io/x",
        "example.com/team",
        # open to users since upstream v1.10
        "kubernetes.io/foo",
        "foo.k8s.io/bar",
    ],
)
def test_allowed_requirement_keys(key: str) -> None:
    manifest = api_builders.with_template_spec(builders.nodepool(), requirements=[{"key": key, "operator": "Exists"}])
    assert parse.nodepool(manifest).template.requirements[0].key == key


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("karpenter.sh/nodepool", 'label "karpenter.sh/nodepool" is restricted'),
        ("kubernetes.io/hostname", 'label "kubernetes.io/hostname" is restricted'),
        ("node.kubernetes.io/instance-type", None),
        ("kubernetes.io/custom", None),
        ("karpenter.sh/custom", 'label domain "karpenter.sh" is restricted'),
        ("karpenter.k8s.aws/custom", 'label domain "karpenter.k8s.aws" is restricted'),
        ("example.com/team", None),
    ],
)
def test_template_label_restrictions(label: str, message: str | None) -> None:
    manifest = builders.nodepool()
    manifest["spec"]["template"]["metadata"] = {"labels": {label: "x"}}
    if message is None:
        assert parse.nodepool(manifest).template.labels == {label: "x"}
    else:
        assert f"spec.template.metadata.labels: {message}" in problems_of(manifest)


def test_budget_schedule_and_duration_come_together() -> None:
    ok = builders.nodepool(
        disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily", "duration": "10m"}]}
    )
    assert parse.nodepool(ok).disruption.budgets[0].duration == 600
    bad = builders.nodepool(disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "@daily"}]})
    assert problems_of(bad) == ["spec.disruption.budgets: 'schedule' must be set with 'duration'"]


@pytest.mark.parametrize("schedule", ["61 * * * *", "* 24 * * *", "* * * * * *", "* * 0 * *", "* * * foo *"])
def test_budget_cron_is_checked(schedule: str) -> None:
    manifest = builders.nodepool(
        disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": schedule, "duration": "1h"}]}
    )
    [problem] = problems_of(manifest)
    assert problem.startswith("spec.disruption.budgets[0].schedule: ")


def test_every_problem_is_reported_at_once_with_paths() -> None:
    manifest = builders.nodepool(
        weight=101,
        limits={"cpu": "lots"},
        disruption={
            "consolidationPolicy": "Sometimes",
            "consolidateAfter": "5 minutes",
            "budgets": [{"nodes": "200%"}],
        },
    )
    manifest = api_builders.with_template_spec(
        manifest,
        nodeClassRef={"group": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass"},
        expireAfter="30d",
        taints=[{"key": "a", "effect": "Sometimes"}],
    )
    paths = {p.split(": ", 1)[0] for p in problems_of(manifest)}
    assert paths == {
        "spec.weight",
        "spec.limits[cpu]",
        "spec.disruption.consolidationPolicy",
        "spec.disruption.consolidateAfter",
        "spec.disruption.budgets[0].nodes",
        "spec.template.spec.nodeClassRef.group",
        "spec.template.spec.nodeClassRef.name",
        "spec.template.spec.expireAfter",
        "spec.template.spec.taints[0].effect",
    }


def test_static_nodepool_rules() -> None:
    assert parse.nodepool(builders.nodepool(replicas=3, limits={"nodes": 5})).replicas == 3
    assert problems_of(builders.nodepool(replicas=3, limits={"cpu": 5})) == [
        "spec: only 'limits.nodes' is supported on static NodePools"
    ]
    assert problems_of(builders.nodepool(replicas=3, weight=5)) == [
        "spec: 'weight' is not supported on static NodePools"
    ]


def test_missing_template_and_wrong_kind() -> None:
    manifest = builders.nodepool()
    del manifest["spec"]["template"]
    manifest["kind"] = "Provisioner"
    assert problems_of(manifest) == ["kind: must be 'NodePool', got 'Provisioner'", "spec.template: Required value"]


def test_unknown_fields_are_refused() -> None:
    manifest = builders.nodepool(ttlSecondsAfterEmpty=30)
    assert problems_of(manifest) == ["spec.ttlSecondsAfterEmpty: unknown field"]


def test_duplicate_taints_are_refused() -> None:
    manifest = api_builders.with_template_spec(
        builders.nodepool(),
        taints=[{"key": "a", "effect": "NoSchedule"}],
        startupTaints=[{"key": "a", "effect": "NoSchedule", "value": "x"}],
    )
    assert problems_of(manifest) == [
        'spec.template.spec.startupTaints[0]: duplicate taint key/effect pair "a:NoSchedule"'
    ]
