"""The controller image, checked without a Docker engine: the Dockerfile's shape, its pins, and what it ships.

The runtime dependency closure is what `uv export --extra controller` resolves from uv.lock, the same selection the
Dockerfile's `uv sync` installs; the modules the image ships are controller/ less what .dockerignore leaves out.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from functools import cache
from pathlib import Path

import pytest

import karpy

REPO = Path(__file__).resolve().parents[2]
UV = REPO / ".tools" / "boot" / "bin" / "uv"
DOCKERFILE = (REPO / "Dockerfile").read_text()
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

# Distributions the image must never carry: Pulumi (infra extra), the emulators and the test and lint tools (dev).
NEVER_IN_THE_IMAGE = {
    "pulumi",
    "pulumi-aws",
    "pulumi-kubernetes",
    "pulumi-docker-build",
    "moto",
    "kmock",
    "karpy-emulator",
    "kubernetes",
    "pytest",
    "hypothesis",
    "mypy",
    "ruff",
    "pip",
    "setuptools",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def instructions() -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip() if " " in line.strip() else "")
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for op, value in instructions():
        if op == "FROM":
            found.append([])
        if found:
            found[-1].append((op, value))
    return found


def build_args() -> dict[str, str]:
    return dict(value.split("=", 1) for op, value in instructions() if op == "ARG" and "=" in value)


@cache
def runtime_closure() -> frozenset[str]:
    """Every distribution `uv sync --no-dev --extra controller` installs besides karpy, from the committed lock."""
    if not UV.exists():
        pytest.fail(f"{UV} is missing: run `make tools`")
    exported = subprocess.run(
        [str(UV), "export", "--frozen", "--no-dev", "--extra", "controller", "--no-emit-project", "--no-hashes"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return frozenset(normalized(line.split("==")[0]) for line in exported.splitlines() if "==" in line)


def shipped_modules() -> list[Path]:
    """The karpy sources the image's `COPY controller/` brings in, less the .dockerignore'd paths."""
    ignored = [
        REPO / line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip().startswith("controller/")
    ]
    return [
        path
        for path in sorted((REPO / "controller" / "karpy").rglob("*.py"))
        if not any(path == i or i in path.parents for i in ignored)
    ]


@cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per run: the tests below walk every shipped module three times."""
    return ast.parse(path.read_text())


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of every import in a module (module level or inside functions), except karpy's own."""
    return third_party_imports_of(parsed(path))


def guarded_imports(path: Path) -> set[str]:
    """Top-level names imported inside a `try` that handles ImportError: an optional extra whose absence the module
    reports itself (karpy.kube.config reads kubeconfigs with the `kubeconfig` extra, which the image does without)."""
    names: set[str] = set()
    for node in ast.walk(parsed(path)):
        if not isinstance(node, ast.Try):
            continue
        caught = {h.type.id for h in node.handlers if isinstance(h.type, ast.Name)}
        if caught & {"ImportError", "ModuleNotFoundError"}:
            names |= {n for stmt in node.body for n in third_party_imports_of(stmt)}
    return names


def third_party_imports_of(tree: ast.AST) -> set[str]:
    """Top-level names of the imports anywhere under `tree`, except karpy's own and the standard library's."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if name != "karpy" and name not in sys.stdlib_module_names}


@cache
def installed_distributions() -> dict[str, list[str]]:
    """Top-level import name -> its distributions: one scan of site-packages (a scan per lookup cost 20 s a run)."""
    return importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    return {normalized(d) for d in installed_distributions().get(module, [])}


# ---- the Dockerfile ---------------------------------------------------------------------------------------------


def test_every_base_image_is_pinned_by_digest() -> None:
    args = build_args()
    bases = [value.split()[0] for stage in stages() for op, value in stage if op == "FROM"]
    assert len(bases) == 2
    for base in bases:
        reference = args[base[2:-1]] if base.startswith("${") else base
        assert DIGEST.search(reference), f"{base} is not pinned by digest: {reference}"
    # the virtualenv built on one and run on the other needs the same interpreter at the same path
    assert "debian:12-slim" in args["BUILD_IMAGE"]
    assert "distroless/python3-debian12" in args["RUNTIME_IMAGE"]
    assert "UV_PYTHON=/usr/bin/python3.11" in DOCKERFILE


def test_uv_comes_from_pypi_pinned_by_version_and_wheel_hashes() -> None:
    builder = stages()[0]
    (install,) = [value for op, value in builder if op == "RUN" and "uv-requirements.txt" in value]
    assert "--require-hashes" in install
    pins = (REPO / "tools" / "uv-requirements.txt").read_text()
    make_version = re.search(r"^UV_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert make_version is not None
    assert f"uv=={make_version.group(1)} " in pins, "one uv version for `make tools` and the image"
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", pins)) == 2, "one wheel per platform: amd64 and arm64"
    assert ("COPY", "tools/uv-requirements.txt /tmp/uv-requirements.txt") in builder
    assert "!tools/uv-requirements.txt" in (REPO / ".dockerignore").read_text().split()


def test_the_runtime_stage_has_no_build_step_and_runs_karpy_as_nonroot() -> None:
    runtime = stages()[-1]
    assert runtime[0][1].endswith("AS runtime")
    assert [op for op, _ in runtime if op == "RUN"] == [], "distroless has no shell: nothing may RUN there"
    (copy,) = [value for op, value in runtime if op == "COPY"]
    assert copy == "--from=builder --chown=0:0 /opt/karpy/venv /opt/karpy/venv", "only the virtualenv is copied"
    assert ("USER", "65532:65532") in runtime
    assert ("ENTRYPOINT", '["/opt/karpy/venv/bin/karpy"]') in runtime
    assert ("CMD", '["run"]') in runtime


def test_the_dependency_layer_is_the_locked_controller_extra() -> None:
    syncs = [value for op, value in stages()[0] if op == "RUN" and "uv sync" in value]
    assert len(syncs) == 2
    for command in syncs:
        assert {"--frozen", "--no-dev", "--extra controller"} <= set(re.findall(r"--[\w-]+(?: controller)?", command))
        assert "--all-extras" not in command
        assert "--extra infra" not in command
        assert "--extra dev" not in command


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for op, value in instructions():
        if op != "COPY" or "--from=" in value:
            continue
        for source in [part for part in value.split() if not part.startswith("--")][:-1]:
            assert (REPO / source).exists(), source
            assert source.rstrip("/") not in ignored or f"!{source}" in ignored, f".dockerignore excludes {source}"


# ---- what the image ships -----------------------------------------------------------------------------------------


def test_the_runtime_closure_has_no_emulator_test_or_infra_distribution() -> None:
    closure = runtime_closure()
    assert {"kopf", "boto3", "numpy", "pyyaml"} <= closure, "the export is not the controller extra"
    assert closure.isdisjoint(NEVER_IN_THE_IMAGE), sorted(closure & NEVER_IN_THE_IMAGE)


def test_every_import_of_a_shipped_module_is_in_the_runtime_closure() -> None:
    modules = shipped_modules()
    assert REPO / "controller" / "karpy" / "operator" / "main.py" in modules
    assert not [m for m in modules if "karpy_emulator" in third_party_imports(m)]
    closure = runtime_closure()
    missing = {
        f"{path.relative_to(REPO)}: {name}"
        for path in modules
        for name in third_party_imports(path) - guarded_imports(path)
        if not distributions_of(name) & closure
    }
    assert not missing, sorted(missing)


def test_the_emulator_is_outside_the_build_context_and_the_wheel() -> None:
    assert "controller/emulator" in (REPO / ".dockerignore").read_text().split()
    found = setuptools_config()
    wheel = {
        ".".join(d.relative_to(REPO / where).parts)
        for where in found["where"]
        for d in (REPO / where).rglob("*")
        if d.is_dir() and any(d.glob("*.py"))
    }
    packaged = {p for p in wheel if any(fnmatch.fnmatchcase(p, pattern) for pattern in found["include"])}
    assert {"karpy", "karpy.operator", "pulumi_karpy"} <= packaged
    assert not [p for p in packaged if "emulator" in p.split(".")[0]], sorted(packaged)


def setuptools_config() -> dict[str, list[str]]:
    found: dict[str, list[str]] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]
    return found


def test_every_runtime_dependency_is_imported_by_a_shipped_module() -> None:
    """A dependency nothing imports is weight in every node's image pull (the `kubernetes` client was 126 MB)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    direct = [
        normalized(re.split(r"[<>=!~\[; ]", requirement)[0])
        for requirement in [*project["dependencies"], *project["optional-dependencies"]["controller"]]
    ]
    imported = {d for path in shipped_modules() for name in third_party_imports(path) for d in distributions_of(name)}
    assert [d for d in direct if d not in imported] == []


def test_shipped_modules_import_with_only_the_runtime_closure() -> None:
    """Import every shipped module in a fresh interpreter that refuses any distribution outside the closure."""
    closure = sorted(runtime_closure())
    modules = [
        ".".join(path.relative_to(REPO / "controller").with_suffix("").parts).removesuffix(".__init__")
        for path in shipped_modules()
    ]
    # `sys.modules[name] = None` is how the import system spells "not installed": `import` raises and
    # `importlib.util.find_spec` answers None, as for an absent distribution (libraries probe optional ones).
    script = textwrap.dedent(
        f"""
        import importlib, importlib.metadata, re, sys
        closure = set({closure!r})
        for name, owners in importlib.metadata.packages_distributions().items():
            if name != "karpy" and not {{re.sub(r"[-_.]+", "-", d).lower() for d in owners}} & closure:
                sys.modules[name] = None
        for module in {modules!r}:
            importlib.import_module(module)
        print(len({modules!r}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) == len(modules)


def test_the_entry_point_is_karpy_and_it_answers_version() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"karpy": "karpy.cli:main"}
    installed = Path(sys.executable).parent / "karpy"
    result = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == f"karpy {karpy.__version__}"
