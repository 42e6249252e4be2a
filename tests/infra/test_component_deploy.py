"""The Karpenter component under Pulumi's mocks: order of creation and deletion, the image, the queue's KMS key and
policy, and arguments as other languages send them."""

from __future__ import annotations

import dataclasses
import graphlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import defaults, documents, image, policy
from pulumi_karpy import spec as pulumi_karpy_spec

from .conftest import ACCOUNT, REGION, Deployment, Run
from .test_component import POLICY, QUEUE_POLICY, controller_values, deploy

RELEASE = "kubernetes:helm.sh/v3:Release"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
REPO_ROOT = Path(__file__).resolve().parents[2]

# What the controller needs before it starts, so it must be created before the release and deleted after it.
PREREQUISITE_TYPES = {
    "aws:iam/role:Role",
    "aws:iam/policy:Policy",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    "aws:eks/addon:Addon",
    "aws:eks/accessEntry:AccessEntry",
    "kubernetes:core/v1:ConfigMapPatch",
    "aws:iam/instanceProfile:InstanceProfile",
    "aws:sqs/queue:Queue",
    "aws:sqs/queuePolicy:QueuePolicy",
    "aws:cloudwatch/eventRule:EventRule",
    "aws:cloudwatch/eventTarget:EventTarget",
    "aws:ecr/repository:Repository",
    "docker-build:index:Image",
}


def urn_of(deployment: Deployment, type_: str, name: str) -> str:
    (found,) = [
        r for r in deployment.resources if r.type == type_ and r.name == name
    ]  # the recorded dependencies are URNs ending in ::<type>::<name>
    return f"{found.type}::{found.name}"


def dependency_graph(deployment: Deployment) -> dict[str, set[str]]:
    """`type::name` → the `type::name`s it depends on, as the engine recorded them."""
    known = set(deployment.urns)
    return {
        f"{r.type}::{r.name}": {dep.split("$")[-1] if "$" in dep else dep.split("::", 2)[-1] for dep in r.dependencies}
        & known
        for r in deployment.resources
    }


def deletion_order(deployment: Deployment) -> list[str]:
    """The order `pulumi destroy` deletes in: dependents before what they depend on (reverse creation order)."""
    return list(reversed(list(graphlib.TopologicalSorter(dependency_graph(deployment)).static_order())))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"create_pod_identity_agent": True},
        {"access": pulumi_karpy_args.AccessArgs(mode=pulumi_karpy_args.AccessMode.AWS_AUTH)},
        {"node_role": pulumi_karpy_args.NodeRoleArgs(create_instance_profile=True, ipv6=True)},
    ],
    ids=["default", "agent", "aws-auth", "profile-ipv6"],
)
def test_the_release_waits_for_every_identity_access_queue_and_image_resource(
    pulumi_run: Run, options: dict[str, Any]
) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", **options))  # type: ignore[typeddict-item]
    graph = dependency_graph(deployment)
    release = urn_of(deployment, RELEASE, "karpy-controller")
    prerequisites = {f"{r.type}::{r.name}" for r in deployment.resources if r.type in PREREQUISITE_TYPES}
    assert len(prerequisites) >= 25
    # direct or through another prerequisite: the engine orders both the same way
    reachable: set[str] = set()
    frontier = set(graph[release])
    while frontier:
        reachable |= frontier
        frontier = {d for f in frontier for d in graph.get(f, set())} - reachable
    assert prerequisites - reachable == set()
    assert urn_of(deployment, RELEASE, "karpy-crd") in graph[release]


def test_destroy_deletes_the_node_pool_first_and_iam_last(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", default_node_pool=pulumi_karpy_args.DefaultNodePoolArgs()),
    )
    order = deletion_order(deployment)
    position = {urn: i for i, urn in enumerate(order)}
    nodepool = position[urn_of(deployment, NODEPOOL, "karpy-default-nodepool")]
    nodeclass = position[urn_of(deployment, NODECLASS, "karpy-default-nodeclass")]
    release = position[urn_of(deployment, RELEASE, "karpy-controller")]
    assert nodepool < nodeclass < release
    for r in deployment.resources:
        if r.type in PREREQUISITE_TYPES:
            assert release < position[f"{r.type}::{r.name}"], f"{r.name} would go while the controller still runs"
    pool = deployment.get(NODEPOOL, "karpy-default-nodepool").inputs
    assert pool["metadata"]["annotations"] == {defaults.DELETION_POLICY_ANNOTATION: "foreground"}


# ---- the image --------------------------------------------------------------------------------------------------


def test_by_default_the_stack_builds_and_pushes_the_image_and_pins_its_digest(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    repository = deployment.get("aws:ecr/repository:Repository", "karpy-image").inputs
    assert repository["forceDelete"] is True
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}
    built = deployment.get("docker-build:index:Image", "karpy-image").inputs
    context = Path(built["context"]["location"])
    assert not context.is_absolute()
    assert (context / "Dockerfile").resolve() == REPO_ROOT / "Dockerfile"
    assert Path(built["dockerfile"]["location"]).resolve() == REPO_ROOT / "Dockerfile"
    assert built["platforms"] == ["linux/amd64"]  # one platform: a stock Docker engine builds it
    assert built["push"] is True
    url = deployment.outputs["image_repository_url"]
    assert built["tags"] == [f"{url}:{pulumi_karpy_args.VERSION}"]
    registries = built["registries"]
    assert isinstance(registries, dict), "the ECR password must reach the engine as a secret"
    (registry,) = registries["value"]
    assert (registry["address"], registry["username"]) == (url, "AWS")
    digest = deployment.outputs["image_ref"].split("@")[1]
    assert controller_values(deployment)["controller"]["image"] == {"repository": url, "digest": digest}


def test_an_image_reference_builds_nothing(pulumi_run: Run) -> None:
    reference = "registry.example.com/karpy:0.1.0@sha256:" + "b" * 64
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", image=pulumi_karpy_args.ImageArgs(reference=reference)),
    )
    assert deployment.of_type("docker-build:index:Image") == []
    assert deployment.of_type("aws:ecr/repository:Repository") == []
    assert deployment.outputs["image_ref"] == reference
    assert deployment.outputs["image_repository_url"] is None
    assert controller_values(deployment)["controller"]["image"] == {
        "repository": "registry.example.com/karpy",
        "tag": "0.1.0",
        "digest": "sha256:" + "b" * 64,
    }


@pytest.mark.parametrize(
    ("reference", "values"),
    [
        ("karpy", {"repository": "karpy"}),
        ("ghcr.io/o/karpy:0.1.0", {"repository": "ghcr.io/o/karpy", "tag": "0.1.0"}),
        ("localhost:5000/karpy:dev", {"repository": "localhost:5000/karpy", "tag": "dev"}),
        ("localhost:5000/karpy", {"repository": "localhost:5000/karpy"}),
        ("r/k@sha256:" + "c" * 64, {"repository": "r/k", "digest": "sha256:" + "c" * 64}),
    ],
)
def test_reference_values(reference: str, values: dict[str, str]) -> None:
    assert image.reference_values(reference) == values


def test_a_wheel_install_without_sources_must_name_an_image(tmp_path: Path) -> None:
    (problem,) = image.context_problems(str(tmp_path))
    assert "no Dockerfile, uv.lock, pyproject.toml in image.context" in problem
    assert image.context_problems(None) == []  # this checkout has them


# ---- queue: KMS, names, policy statements -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "1234abcd-12ab-34cd-56ef-1234567890ab",
        f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    ],
)
def test_a_customer_key_grants_the_controller_kms_decrypt(pulumi_run: Run, key: str) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(kms_master_key_id=key)),
    )
    statements = json.loads(deployment.get(POLICY, "karpy-controller-interruption").inputs["policy"])["Statement"]
    decrypt = [s for s in statements if s["Action"] == "kms:Decrypt"]
    assert decrypt == [
        {
            "Sid": "AllowInterruptionQueueDecryption",
            "Effect": "Allow",
            "Resource": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "Action": "kms:Decrypt",
        }
    ]


def test_sse_sqs_needs_no_kms_grant(pulumi_run: Run) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    policy_text = deployment.get(POLICY, "karpy-controller-interruption").inputs["policy"]
    assert "kms:" not in policy_text


def test_rules_are_named_from_prefixes_so_two_stacks_coexist(pulumi_run: Run) -> None:
    one = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(rule_name_prefix="blue-")
        ),
    )
    rules = one.of_type("aws:cloudwatch/eventRule:EventRule")
    assert sorted(r.inputs["namePrefix"] for r in rules) == sorted(f"blue-{s.name}-" for s in documents.EVENT_RULES)
    assert all(len(r.inputs["namePrefix"]) + 26 <= 64 for r in rules)


def test_extra_queue_policy_statements(pulumi_run: Run) -> None:
    extra = {
        "Sid": "OtherBus",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::210987654321:root"},
        "Action": "sqs:SendMessage",
    }
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(policy_statements=[extra])
        ),
    )
    statements = json.loads(deployment.get(QUEUE_POLICY, "karpy-queue-policy").inputs["policy"])["Statement"]
    assert [s["Sid"] for s in statements] == ["AllowEventBridgeToSend", "DenyHTTP", "OtherBus"]
    assert statements[2] == {**extra, "Resource": deployment.outputs["queue_arn"]}


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        (pulumi_karpy_args.QueueArgs(policy_statements=[{"Effect": "Allow", "Action": "sqs:*"}]), "needs Principal"),
        (pulumi_karpy_args.QueueArgs(kms_master_key_id="alias/karpy"), "not an alias"),
        (pulumi_karpy_args.QueueArgs(kms_master_key_id="k", kms_data_key_reuse_period_seconds=5), "60..86400"),
        (pulumi_karpy_args.QueueArgs(rule_name_prefix="x" * 24), "queue.rule_name_prefix"),
    ],
)
def test_bad_queue_arguments(queue: pulumi_karpy_args.QueueArgs, message: str) -> None:
    problems = pulumi_karpy_spec.validate(
        pulumi_karpy_spec.resolve(pulumi_karpy_args.KarpenterArgs(cluster_name="demo", queue=queue))
    )
    assert any(message in p for p in problems), problems


def test_the_kms_key_arn_builder() -> None:
    assert policy.kms_key_arn("k1", partition="aws-cn", region="cn-north-1", account_id="1") == (
        "arn:aws-cn:kms:cn-north-1:1:key/k1"
    )


# ---- arguments as other languages send them ---------------------------------------------------------------------


def test_plain_dictionaries_with_string_enums_resolve(pulumi_run: Run) -> None:
    """What the component provider passes from TypeScript or YAML: dictionaries, enum values as strings, nulls."""
    raw = {
        "cluster_name": "demo",
        "identity_mode": "irsa",
        "oidc_provider_arn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/x",
        "oidc_issuer_url": "https://x",
        "access": {"mode": "aws_auth", "access_entry_type": None},
        "queue": {"enabled": False},
    }
    resolved = pulumi_karpy_spec.resolve(raw)
    assert resolved.identity_mode is pulumi_karpy_args.IdentityMode.IRSA
    assert resolved.access.mode is pulumi_karpy_args.AccessMode.AWS_AUTH
    assert resolved.access.access_entry_type == "EC2_LINUX"
    assert resolved.queue.enabled is False
    deployment = deploy(pulumi_run, raw)  # type: ignore[arg-type]
    assert deployment.of_type("aws:sqs/queue:Queue") == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"cluster_name": "demo", "queu": {}}, "queu: unknown argument"),
        ({"cluster_name": "demo", "queue": {"enable": False}}, "queue.enable: unknown argument"),
        ({"cluster_name": "demo", "identity_mode": "oidc"}, "identity_mode: 'oidc' is not one of"),
        ({"cluster_name": "demo", "access": {"mode": "x"}}, "access.mode: 'x' is not one of"),
        ({"cluster_name": "demo", "helm": []}, "helm: expected a mapping"),
        ({}, "cluster_name is required"),
    ],
)
def test_resolve_names_every_bad_argument(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(pulumi_karpy_spec.InvalidArguments, match=message):
        pulumi_karpy_spec.resolve(raw)


def test_every_public_argument_has_a_resolved_field() -> None:
    for typed_dict, resolved in pulumi_karpy_spec.SPEC_OF_ARGS.items():
        keys = set(typed_dict.__annotations__)
        assert keys == {f.name for f in dataclasses.fields(resolved)}, typed_dict.__name__
    nested = {
        key
        for key, hint in pulumi_karpy_args.KarpenterArgs.__annotations__.items()
        if any(typing.is_typeddict(a) for a in (hint, *typing.get_args(hint)))
    }
    assert set(pulumi_karpy_spec.GROUPS) == nested
