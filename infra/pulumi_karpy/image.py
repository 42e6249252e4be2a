"""The controller image: built from this package's Dockerfile and pushed to an ECR repository the stack owns
(pulumi-docker-build, BuildKit; one platform unless asked for more), or a reference the caller gives. The release pins
the pushed digest, so a rebuild rolls the controller and a re-tag cannot change what runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import scope as pulumi_karpy_scope
from pulumi_karpy import spec as pulumi_karpy_spec

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""Where an installed-from-source package's Dockerfile is: the repository root (infra/pulumi_karpy/../..)."""

_REFERENCE = re.compile(
    r"^(?P<repository>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


@dataclass(frozen=True, slots=True)
class ControllerImage:
    values: pulumi.Output[dict[str, str]]
    """The chart's `image` values: repository plus the pinned digest (or the given tag)."""
    reference: pulumi.Output[str]
    repository_url: pulumi.Output[str | None]
    resources: list[pulumi.Resource]


def context_problems(context: str | None) -> list[str]:
    root = Path(context) if context is not None else SOURCE_ROOT
    missing = [name for name in ("Dockerfile", "uv.lock", "pyproject.toml") if not (root / name).is_file()]
    if not missing:
        return []
    where = "image.context" if context is not None else "this package's source tree (an installed wheel has none)"
    return [f"image: no {', '.join(missing)} in {where} at {root}: set image.reference or image.context"]


def relative(path: Path) -> str:
    """`path` relative to the working directory (the Pulumi project), so another checkout shows no diff."""
    return os.path.relpath(path)


def reference_values(reference: str) -> dict[str, str]:
    """`repo:tag@sha256:...` → the chart's image values (repository, and tag and/or digest)."""
    match = _REFERENCE.match(reference)
    if match is None:
        raise ValueError(f"image.reference: {reference!r} is not an image reference (repository[:tag][@sha256:...])")
    return {key: value for key, value in match.groupdict().items() if value}


def declare(scope: pulumi_karpy_scope.Scope) -> ControllerImage:
    spec = scope.spec.image
    if not spec.build:
        reference = pulumi.Output.from_input(spec.reference).apply(str)
        return ControllerImage(
            values=reference.apply(reference_values),
            reference=reference,
            repository_url=pulumi.Output.from_input(None),
            resources=[],
        )
    repository = aws.ecr.Repository(
        f"{scope.name}-image",
        name=spec.repository_name,
        # Destroy removes the images with the repository: the stack created them.
        force_delete=True,
        image_scanning_configuration={"scan_on_push": True},
        tags=dict(scope.tags),
        opts=scope.child,
    )
    token = aws.ecr.get_authorization_token_output(
        registry_id=repository.registry_id, opts=pulumi.InvokeOutputOptions(parent=scope.child.parent)
    )
    context = Path(spec.context) if spec.context is not None else SOURCE_ROOT
    image = docker_build.Image(
        f"{scope.name}-image",
        context=docker_build.BuildContextArgs(location=relative(context)),
        dockerfile=docker_build.DockerfileArgs(location=relative(context / "Dockerfile")),
        platforms=[docker_build.Platform(p) for p in pulumi_karpy_spec.build_platforms(scope.spec)],
        push=True,
        tags=[repository.repository_url.apply(lambda url: f"{url}:{pulumi_karpy_args.VERSION}")],
        registries=[
            docker_build.RegistryArgs(
                address=repository.repository_url,
                username=token.user_name,
                password=pulumi.Output.secret(token.password),
            )
        ],
        opts=scope.child,
    )
    values = pulumi.Output.all(repository.repository_url, image.digest).apply(
        lambda v: {"repository": v[0], "digest": v[1]}
    )
    return ControllerImage(
        values=values,
        reference=values.apply(lambda v: f"{v['repository']}@{v['digest']}"),
        repository_url=repository.repository_url,
        resources=[repository, image],
    )
