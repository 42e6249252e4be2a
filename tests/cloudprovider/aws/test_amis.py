"""Alias → SSM parameters and newest image per requirement set (pure)."""

from __future__ import annotations

import pytest

from karpy.api import labels, meta
from karpy.cloudprovider.aws import amis


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        (
            "al2023@latest",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
        ),
        (
            "al2023@v20240807",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/"
            "amazon-eks-node-al2023-x86_64-standard-1.31-v20240807/image_id",
        ),
        ("al2@latest", "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"),
        (
            "al2@v20240807",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/amazon-eks-node-1.31-v20240807/image_id",
        ),
        ("bottlerocket@latest", "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id"),
        ("bottlerocket@v1.20.4", "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.4/image_id"),
        (
            "windows2022@latest",
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id",
        ),
    ],
)
def test_first_parameter_of_each_alias_is_the_standard_amd64_one(alias: str, expected: str) -> None:
    params = amis.alias_parameters(alias, k8s_version="1.31")
    assert params[0].name == expected
    assert meta.NodeSelectorRequirement(labels.LABEL_ARCH, meta.Operator.IN, ("amd64",)) in params[0].requirements


def test_al2023_covers_each_arch_and_variant_with_gpu_requirements() -> None:
    params = amis.alias_parameters("al2023@latest", k8s_version="1.31")
    variants = [p.name.split("/")[7:9] for p in params]
    assert variants == [
        ["x86_64", "standard"],
        ["x86_64", "nvidia"],
        ["x86_64", "neuron"],
        ["arm64", "standard"],
        ["arm64", "nvidia"],
    ]
    nvidia = params[1].requirements
    assert meta.NodeSelectorRequirement(labels.LABEL_INSTANCE_GPU_COUNT, meta.Operator.EXISTS) in nvidia


@pytest.mark.parametrize("alias", ["al2023", "nope@latest", "windows2022@v1", "@latest"])
def test_bad_alias_is_a_clear_error(alias: str) -> None:
    with pytest.raises(amis.AliasError, match="alias"):
        amis.alias_parameters(alias, k8s_version="1.31")


def test_newest_image_per_requirement_set_prefers_non_deprecated() -> None:
    amd = amis.image_requirements({"Architecture": "x86_64"})
    arm = amis.image_requirements({"Architecture": "arm64"})
    images = [
        ({"ImageId": "ami-old", "CreationDate": "2024-01-01T00:00:00.000Z"}, amd),
        ({"ImageId": "ami-new", "CreationDate": "2024-06-01T00:00:00.000Z"}, amd),
        (
            {
                "ImageId": "ami-newest-dep",
                "CreationDate": "2024-07-01T00:00:00.000Z",
                "DeprecationTime": "2024-08-01T00:00:00Z",
            },
            amd,
        ),
        ({"ImageId": "ami-arm", "CreationDate": "2024-02-01T00:00:00.000Z"}, arm),
    ]
    now = 1_800_000_000.0  # 2027: the deprecation time has passed
    out = amis.newest_per_requirements(images, now=now)
    assert [a.id for a in out] == ["ami-new", "ami-arm"]
    assert out[1].requirements == arm
    before = amis.newest_per_requirements(images, now=0.0)
    assert before[0].id == "ami-newest-dep"
    assert not before[0].deprecated
