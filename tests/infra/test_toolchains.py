"""Every Python stack installs with the toolchain Pulumi runs for it, in a fresh directory, and its program then runs
under Pulumi's mocks with that virtualenv's python (tests/infra/mocked_program.py): the root stack and the examples
with uv, the component package (infra/PulumiPlugin.yaml) with pip on each supported Python found here.

The commands are Pulumi's own (pulumi/pulumi sdk/python/toolchain):
- uv.go: the virtualenv is `runtime.options.virtualenv` joined to the project root, or else `.venv` beside the
  nearest uv.lock or pyproject.toml above the program directory; `pulumi install` runs `uv sync` in the program
  directory and every run first `uv sync --inexact` there, both with UV_PROJECT_ENVIRONMENT=<that virtualenv>;
  the program runs with <virtualenv>/bin/python.
- pip.go: `python3 -m venv <root>/<virtualenv>`, then in the root `<venv>/bin/python -m pip install --upgrade pip
  setuptools wheel` and `<venv>/bin/python -m pip install -r requirements.txt`.

Network: PyPI only, through uv's and pip's caches. Slow-ish (a few minutes in all), so marked `toolchain`: `make test`
runs them, `make test-fast` leaves them out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tools import pythons

pytestmark = [pytest.mark.toolchain, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
UV = REPO / ".tools" / "boot" / "bin" / "uv"
DRIVER = Path(__file__).with_name("mocked_program.py")
IMAGE = "registry.example.com/karpy@sha256:" + "f" * 64
COMPONENT = ["karpy:index:Karpenter", "karpy"]

# What each example needs in its stack config to run (its required keys), and a published image: a copy of an example
# outside the repository has no Dockerfile to build.
EXAMPLES: dict[str, dict[str, str]] = {
    "new-cluster": {"aws:region": "us-west-2"},
    "reuse-in-your-program": {
        "karpy-reuse:clusterName": "prod",
        "karpy-reuse:oidcProviderArn": "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/A",
        "karpy-reuse:oidcIssuerUrl": "https://oidc.eks.us-west-2.amazonaws.com/id/A",
    },
    "migrate-from-managed-node-groups": {
        "karpy-migrate-from-mng:phase": "1",
        "karpy-migrate-from-mng:clusterName": "prod",
        "karpy-migrate-from-mng:nodeGroups": '["system", "general"]',
        "karpy-migrate-from-mng:subnetIds": '["subnet-a"]',
        "karpy-migrate-from-mng:securityGroupId": "sg-cluster",
    },
    "migrate-from-karpenter": {
        "karpy-migrate-from-karpenter:clusterName": "prod",
        "karpy-migrate-from-karpenter:nodeRoleArn": "arn:aws:iam::123456789012:role/KarpenterNodeRole-prod",
    },
}


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell gives Pulumi: none of this test run's virtualenv or uv settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "PYTHONHOME", "PYTHONPYCACHEPREFIX"}
    }
    return env | {"UV_PYTHON_DOWNLOADS": "never", **extra}


def run(command: list[str | Path], *, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(map(str, command))} in {cwd}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def copy_checkout(destination: Path) -> Path:
    """This checkout's files as git sees them (tracked and new, not ignored), symlinks kept: a fresh clone."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, env=clean_env())
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the work tree
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not UV.exists():
        pytest.fail(f"{UV} is missing: run `make tools`")
    return copy_checkout(tmp_path_factory.mktemp("clone") / "karpy")


def uv_virtualenv(root: Path, program: Path, option: str | None) -> Path:
    """Where Pulumi's uv toolchain puts the virtualenv (uv.go newUv; UV_PROJECT_ENVIRONMENT is unset here)."""
    if option:
        return root / option
    for directory in (program, *program.parents):
        if (directory / "uv.lock").exists() or (directory / "pyproject.toml").exists():
            return directory / ".venv"
    return program / ".venv"


def pulumi_uv_install(root: Path) -> tuple[Path, Path]:
    """`pulumi install`, then what precedes every run, for the project at `root`: (program dir, virtualenv)."""
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    options = project["runtime"].get("options", {})
    assert options.get("toolchain") == "uv"
    program = (root / project.get("main", ".")).resolve()
    venv = uv_virtualenv(root, program, options.get("virtualenv"))
    for command in (["sync"], ["sync", "--inexact"]):
        run([UV, *command], cwd=program, env=clean_env(UV_PROJECT_ENVIRONMENT=str(venv)))
    return program, venv


def run_under_mocks(venv: Path, program: Path, config: dict[str, str], project: str) -> dict[str, Any]:
    out = run(
        [venv / "bin" / "python", DRIVER, program, json.dumps(config), project],
        cwd=program,
        env=clean_env(),
    )
    result: dict[str, Any] = json.loads(out)
    assert result["prefix"] == str(venv), "the program ran in another virtualenv"
    return result


def test_the_root_stack_on_a_fresh_clone(checkout: Path) -> None:
    program, venv = pulumi_uv_install(checkout)
    assert venv == checkout / ".venv"  # the one `make tools` builds too: a plain `uv sync` keeps the dev tools
    assert (venv / "bin" / "pytest").exists()
    result = run_under_mocks(venv, program, {"karpy:clusterName": "prod", "karpy:imageReference": IMAGE}, "karpy")
    assert COMPONENT in result["resources"]
    assert result["outputs"]["imageRef"] == IMAGE
    assert Path(result["pulumi_karpy"]).is_relative_to(checkout)  # the clone's own component, editable


def test_every_example_is_its_own_uv_project() -> None:
    """Each example installs the same way (so one of them runs in the repository below, all of them copied out)."""
    for example in EXAMPLES:
        root = REPO / "examples" / example
        options = yaml.safe_load((root / "Pulumi.yaml").read_text())["runtime"]["options"]
        assert options == {"toolchain": "uv", "virtualenv": ".venv"}, example
        assert 'karpy = { path = "../..", editable = true }' in (root / "pyproject.toml").read_text(), example


def test_an_example_in_the_repository(checkout: Path) -> None:
    example = "new-cluster"
    root = checkout / "examples" / example
    program, venv = pulumi_uv_install(root)
    assert venv == root / ".venv"  # never the repository's own .venv
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())["name"]
    result = run_under_mocks(venv, program, EXAMPLES[example], project)
    assert COMPONENT in result["resources"] or ["karpy:index:Karpenter", "autoscaling"] in result["resources"]
    assert Path(result["pulumi_karpy"]).is_relative_to(checkout)
    assert result["kopf"] is False  # a Pulumi program does not need the controller's dependencies


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_an_example_copied_into_another_repository(checkout: Path, tmp_path: Path, example: str) -> None:
    root = shutil.copytree(REPO / "examples" / example, tmp_path / "their-infra")
    pyproject = root / "pyproject.toml"
    in_repository = 'karpy = { path = "../..", editable = true }'
    assert in_repository in pyproject.read_text()
    # README's form is a git URL; here the same non-editable install from a path (a clone of this checkout).
    pyproject.write_text(pyproject.read_text().replace(in_repository, f'karpy = {{ path = "{checkout}" }}'))
    program, venv = pulumi_uv_install(root)
    assert venv == root / ".venv"
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())["name"]
    result = run_under_mocks(venv, program, {**EXAMPLES[example], f"{project}:imageReference": IMAGE}, project)
    assert COMPONENT in result["resources"] or ["karpy:index:Karpenter", "autoscaling"] in result["resources"]
    installed = Path(result["pulumi_karpy"])
    assert installed.is_relative_to(venv), "karpy must come from the stack's own virtualenv (a wheel)"
    assert (installed.parent / "charts" / "karpy" / "Chart.yaml").is_file()  # the charts ship in the wheel
    assert result["kopf"] is False


PLUGIN_CHECK = """
import importlib.util, json, sys
from pulumi.provider.experimental import analyzer
loaded = importlib.util.spec_from_file_location("plugin_host", "__main__.py")
host = importlib.util.module_from_spec(loaded)
loaded.loader.exec_module(host)
result = analyzer.Analyzer(host.PACKAGE).analyze(host.COMPONENTS)
print(json.dumps({"prefix": sys.prefix, "version": "%d.%d" % sys.version_info[:2],
                  "components": sorted(result["component_definitions"])}))
"""


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_the_component_package_with_pips_toolchain(checkout: Path, tmp_path: Path, version: str) -> None:
    """`pulumi package add` for TypeScript/YAML: Pulumi installs infra/ with pip into infra/venv (PulumiPlugin.yaml)
    using the `python3` first on PATH, then serves the components; here each supported Python stands as python3."""
    python3 = pythons.find(version)
    if python3 is None:
        pytest.skip(f"python{version} is not on this machine (PATH, pyenv)")
    clone = copy_checkout(tmp_path / "karpy")  # its own: the editable install writes build metadata into it
    root = clone / "infra"
    plugin = yaml.safe_load((root / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["options"]["toolchain"] == "pip"
    venv = root / plugin["runtime"]["options"]["virtualenv"]
    # Pulumi's commands exactly; only pip's own setting differs: no bytecode compiled at install (uv's default too),
    # which for pulumi-aws's thousands of modules was most of each install's minutes here.
    env = clean_env(PIP_NO_COMPILE="1")
    run([python3, "-m", "venv", venv], cwd=root, env=env)
    env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}  # ActivateVirtualEnv
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--upgrade", "pip", "setuptools", "wheel"], cwd=root, env=env)
    run([python, "-m", "pip", "install", "-r", "requirements.txt"], cwd=root, env=env)
    result = json.loads(run([python, "-c", PLUGIN_CHECK], cwd=root, env=env))
    assert result["prefix"] == str(venv)
    assert result["version"] == version
    assert result["components"] == ["DiscoveryTags", "Karpenter"]
