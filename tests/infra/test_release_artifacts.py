"""One version for the stack, and the controller image's Dockerfile checked statically (no docker engine here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import karpy
import pulumi_karpy
from pulumi_karpy import args as args_

REPO = Path(__file__).resolve().parents[2]


def test_one_version_for_the_whole_stack() -> None:
    package = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    versions = {
        "pyproject": package,
        "karpy.__version__": karpy.__version__,
        "pulumi_karpy.VERSION": pulumi_karpy.VERSION,
        "component default image tag": args_.HelmArgs().image_tag,
        "component default chart version": args_.HelmArgs().chart_version,
    }
    for chart in ("karpy", "karpy-crd"):
        meta = yaml.safe_load((REPO / "charts" / chart / "Chart.yaml").read_text())
        versions[f"{chart} version"] = meta["version"]
        versions[f"{chart} appVersion"] = meta["appVersion"]
    values = yaml.safe_load((REPO / "charts" / "karpy" / "values.yaml").read_text())
    # an empty tag means appVersion (charts/karpy/templates/_helpers.tpl "karpy.image")
    versions["chart image tag"] = values["image"]["tag"] or versions["karpy appVersion"]
    assert set(versions.values()) == {package}, versions
    assert values["image"]["repository"] == args_.DEFAULT_IMAGE_REPOSITORY


DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_dockerfile_is_multi_stage_on_python_311_slim() -> None:
    stages = [value for op, value in instructions() if op == "FROM"]
    assert len(stages) == 2
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE
    assert stages[-1].endswith("AS runtime")
    assert any("--from=builder" in value for op, value in instructions() if op == "COPY")


def test_dockerfile_installs_the_locked_controller_extra_only() -> None:
    syncs = [value for op, value in instructions() if op == "RUN" and "uv sync" in value]
    assert syncs
    for command in syncs:
        assert "--frozen" in command
        assert "--extra controller" in command
        assert "--extra infra" not in command
        assert "--extra dev" not in command


def test_dockerfile_copies_only_existing_paths() -> None:
    for op, value in instructions():
        if op != "COPY" or "--from=" in value:
            continue
        sources = [part for part in value.split() if not part.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), source
        ignored = (REPO / ".dockerignore").read_text().split()
        for source in sources:
            assert source.rstrip("/") not in ignored, f"{source} is copied but .dockerignore excludes it"


def test_dockerfile_runs_karpy_run_as_non_root() -> None:
    ops = instructions()
    users = [value for op, value in ops if op == "USER"]
    assert users == ["65532:65532"]
    user_index = ops.index(("USER", "65532:65532"))
    assert all(op != "RUN" for op, _ in ops[user_index:]), "nothing runs as root after USER"
    assert ("ENTRYPOINT", '["karpy"]') in ops
    assert ("CMD", '["run"]') in ops
    chart = yaml.safe_load((REPO / "charts" / "karpy" / "values.yaml").read_text())
    assert chart["podSecurityContext"]["runAsUser"] == 65532
    entry_points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry_points["karpy"] == "karpy.cli:main"


def test_the_wheel_ships_every_chart_file() -> None:
    """pulumi_karpy/charts links to charts/, and package-data globs cover every chart file (so a wheel user needs no
    checkout: the component finds its own version of the charts next to itself)."""
    package = REPO / "infra" / "pulumi_karpy"
    assert (package / "charts").resolve() == (REPO / "charts").resolve()
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "pulumi_karpy"
    ]
    shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    chart_files = {
        package / "charts" / p.relative_to(REPO / "charts") for p in (REPO / "charts").rglob("*") if p.is_file()
    }
    assert chart_files
    assert chart_files <= shipped, sorted(str(p) for p in chart_files - shipped)
