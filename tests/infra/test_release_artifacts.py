"""One version for the stack, and the charts shipped inside the component's wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

import karpy
import pulumi_karpy
from pulumi_karpy import spec as pulumi_karpy_spec

REPO = Path(__file__).resolve().parents[2]


def test_one_version_for_the_whole_stack() -> None:
    package = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    versions = {
        "pyproject": package,
        "karpy.__version__": karpy.__version__,
        "pulumi_karpy.VERSION": pulumi_karpy.VERSION,
        "component default chart version": pulumi_karpy_spec.Helm().chart_version,
    }
    for chart in ("karpy", "karpy-crd"):
        meta = yaml.safe_load((REPO / "charts" / chart / "Chart.yaml").read_text())
        versions[f"{chart} version"] = meta["version"]
        versions[f"{chart} appVersion"] = meta["appVersion"]
    values = yaml.safe_load((REPO / "charts" / "karpy" / "values.yaml").read_text())
    # an empty tag means appVersion (charts/karpy/templates/_helpers.tpl "karpy.image")
    versions["chart image tag"] = values["controller"]["image"]["tag"] or versions["karpy appVersion"]
    assert set(versions.values()) == {package}, versions


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
