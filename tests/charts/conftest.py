"""Shared helpers for the chart tests: the real helm binary (from `make tools`) with its homes in a tmp dir."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import crds

REPO = Path(__file__).resolve().parents[2]
HELM = REPO / ".tools" / "bin" / "helm"
CHART = REPO / "charts" / "karpy"
CRD_CHART = REPO / "charts" / "karpy-crd"
IMAGE_REPOSITORY = "registry.example.com/karpy"
"""The chart requires an image repository (none is published under a default name): the tests render with this one."""

Helm = Callable[..., subprocess.CompletedProcess[str]]
Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    if not HELM.exists():
        pytest.fail(f"{HELM} is missing: run `make tools`")
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([str(HELM), *args], capture_output=True, text=True, env=env, timeout=60, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


def set_args(values: dict[str, str]) -> list[str]:
    """`--set k=v`; a `str:` key prefix means --set-string, `json:` means --set-json (helm --set keeps 0.1 a string)."""
    args = []
    for key, value in values.items():
        flag = {"str": "--set-string", "json": "--set-json"}.get(key.partition(":")[0] if ":" in key else "", "--set")
        args += [flag, f"{key.split(':', 1)[1] if flag != '--set' else key}={value}"]
    return args


@pytest.fixture(scope="session")
def render(helm: Helm) -> Render:
    cache: dict[tuple[Any, ...], str] = {}  # helm starts in ~0.3 s; the same rendering is asked for many times

    def run(
        values: dict[str, str] | None = None, *, chart: Path = CHART, extra: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        given = {"settings.clusterName": "demo", "controller.image.repository": IMAGE_REPOSITORY, **(values or {})}
        key = (tuple(sorted(given.items())), chart, tuple(extra))
        if key not in cache:
            cache[key] = helm("template", "kp", str(chart), "--namespace", "karpy", *set_args(given), *extra).stdout
        return [doc for doc in yaml.safe_load_all(cache[key]) if doc]

    return run


HOOK = "helm.sh/hook"


def is_hook(doc: dict[str, Any]) -> bool:
    """A Helm hook (the teardown's objects): created only when its event comes, never part of the installed set."""
    return HOOK in ((doc.get("metadata") or {}).get("annotations") or {})


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The installed objects of `kind` (hooks left out: see `hooks`)."""
    return [d for d in docs if d["kind"] == kind and not is_hook(d)]


def hooks(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and is_hook(d)]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


Schemas = dict[tuple[str, str], dict[str, Any]]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="session")
def crd_schemas() -> Schemas:
    """(apiVersion, kind) -> openAPIV3Schema for every served version of every CRD karpy ships.

    Taken from the single source (`karpy.api.crds`); test_crd_chart_renders_the_crds proves the chart renders
    exactly these, so validating against them is validating against what the chart installs.
    """
    found: Schemas = {}
    for crd in crds.build_crds():
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                api_version = f"{crd['spec']['group']}/{version['name']}"
                found[(api_version, crd["spec"]["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return found
