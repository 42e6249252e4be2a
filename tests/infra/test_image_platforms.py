"""The controller image builds for one platform by default (what a stock Docker engine can build: a multi-platform
build needs the containerd image store, and QEMU for the foreign architecture), the one the controller runs on;
more on request. Checked on the docker-build Image args and the release values, under Pulumi's mocks."""

from __future__ import annotations

from typing import Any

import pytest

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import spec as pulumi_karpy_spec

from .conftest import Run
from .test_component import controller_values, deploy

IMAGE = "docker-build:index:Image"


def built(run: Run, **karpenter: Any) -> tuple[list[str], dict[str, Any]]:
    """(the platforms the image is built for, the controller release's nodeSelector) for these arguments."""
    deployment = deploy(run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", **karpenter))
    (image,) = deployment.of_type(IMAGE)
    return list(image.inputs["platforms"]), dict(controller_values(deployment).get("nodeSelector", {}))


def test_by_default_one_platform_amd64_and_the_controller_runs_there(pulumi_run: Run) -> None:
    platforms, selector = built(pulumi_run)
    assert platforms == ["linux/amd64"]
    assert selector == {"kubernetes.io/arch": "amd64"}


def test_the_controllers_nodes_choose_the_platform(pulumi_run: Run) -> None:
    platforms, selector = built(
        pulumi_run,
        helm=pulumi_karpy_args.HelmArgs(values={"nodeSelector": {"kubernetes.io/arch": "arm64", "role": "system"}}),
    )
    assert platforms == ["linux/arm64"]
    assert selector == {"kubernetes.io/arch": "arm64", "role": "system"}


def test_a_multi_platform_build_on_request_leaves_the_controller_unpinned(pulumi_run: Run) -> None:
    platforms, selector = built(pulumi_run, image=pulumi_karpy_args.ImageArgs(platforms=["linux/amd64", "linux/arm64"]))
    assert platforms == ["linux/amd64", "linux/arm64"]
    assert "kubernetes.io/arch" not in selector


def test_one_requested_platform_pins_the_controller_to_it(pulumi_run: Run) -> None:
    platforms, selector = built(pulumi_run, image=pulumi_karpy_args.ImageArgs(platforms=["linux/arm64"]))
    assert platforms == ["linux/arm64"]
    assert selector == {"kubernetes.io/arch": "arm64"}


def test_a_given_image_pins_nothing(pulumi_run: Run) -> None:
    reference = "registry.example.com/karpy@sha256:" + "e" * 64
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", image=pulumi_karpy_args.ImageArgs(reference=reference)),
    )
    assert deployment.of_type(IMAGE) == []
    assert "nodeSelector" not in controller_values(deployment)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (
            {"image": {"platforms": ["linux/s390x"]}},
            "image.platforms: linux/s390x is not one of linux/amd64, linux/arm64",
        ),
        (
            {"helm": {"values": {"nodeSelector": {"kubernetes.io/arch": "ppc64le"}}}},
            "helm.values.nodeSelector kubernetes.io/arch: linux/ppc64le is not one of linux/amd64, linux/arm64",
        ),
        (
            {
                "image": {"platforms": ["linux/amd64"]},
                "helm": {"values": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}},
            },
            "image.platforms: ['linux/amd64'] has no linux/arm64, the controller's nodes",
        ),
    ],
)
def test_platforms_that_cannot_run_the_controller_are_refused(raw: dict[str, Any], problem: str) -> None:
    problems = pulumi_karpy_spec.validate(pulumi_karpy_spec.resolve({"cluster_name": "demo", **raw}))
    assert any(problem in p for p in problems), problems


def test_a_given_image_may_run_on_any_architecture() -> None:
    raw = {
        "cluster_name": "demo",
        "image": {"reference": "r/k:1"},
        "helm": {"values": {"nodeSelector": {"kubernetes.io/arch": "s390x"}}},
    }
    assert pulumi_karpy_spec.validate(pulumi_karpy_spec.resolve(raw)) == []
