"""docs/ARCHITECTURE.md cannot rot: every `karpy.…` name it gives imports and resolves, every repository path it
gives exists (a `path::name` names a function or class of that file), and every karpy package is placed in it."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil
import re
from types import ModuleType

import pytest

import karpy

ROOT = pathlib.Path(__file__).parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
CODE = re.compile(r"`([^`\n]+)`")
NAME = re.compile(r"^karpy(\.[A-Za-z_][A-Za-z0-9_]*)+$")
PATH = re.compile(r"(?:controller|infra|tests|bench|tools|docs|charts)/[\w./-]+\.(?:py|md|toml|yaml)(?:::\w+)?")


def spans(text: str) -> list[str]:
    return CODE.findall(text)


def dotted_names(text: str) -> list[str]:
    return sorted({s.removesuffix("()") for s in spans(text) if NAME.match(s.removesuffix("()"))})


def repository_paths(text: str) -> list[str]:
    return sorted({p for s in spans(text) for p in PATH.findall(s)})


def resolve(dotted: str) -> object:
    """The module, class, function or attribute `dotted` names: the longest importable prefix, then attributes."""
    parts = dotted.split(".")
    module: ModuleType | None = None
    rest: list[str] = []
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        rest = parts[cut:]
        break
    assert module is not None, f"{dotted}: no importable module"
    found: object = module
    for attr in rest:
        assert hasattr(found, attr), f"{dotted}: {'.'.join(parts[: parts.index(attr)])} has no {attr!r}"
        found = getattr(found, attr)
    return found


def defined_names(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


TEXT = DOC.read_text()


@pytest.mark.parametrize("dotted", dotted_names(TEXT))
def test_every_name_in_the_document_exists(dotted: str) -> None:
    resolve(dotted)


@pytest.mark.parametrize("path", repository_paths(TEXT))
def test_every_path_in_the_document_exists(path: str) -> None:
    file, _, name = path.partition("::")
    assert (ROOT / file).exists(), f"{file} does not exist"
    if name:
        assert name in defined_names(ROOT / file), f"{file} defines no {name}"


def test_every_karpy_package_is_placed_in_the_document() -> None:
    named = set(dotted_names(TEXT))
    packages = [f"karpy.{m.name}" for m in pkgutil.iter_modules(karpy.__path__) if m.ispkg]
    missing = [p for p in packages if p not in named]
    assert not missing, f"packages docs/ARCHITECTURE.md does not place: {missing}"


def observers(root: pathlib.Path = ROOT / "controller" / "karpy") -> list[str]:
    """The dotted names of the controllers' observers: every public class named `Observer` or deriving from one."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {ast.unparse(base).rpartition(".")[2] for base in node.bases}
            if "Observer" in {node.name, *bases}:
                found.append(f"{module}.{node.name}")
    return found


def test_every_controllers_observer_is_placed_in_the_document() -> None:
    """Each controller tells what it did through one observer: a reader finds them all in the document."""
    found = observers()
    assert "karpy.disruption.publisher.Publisher" in found  # derived from an Observer: seen too
    missing = sorted(set(found) - set(dotted_names(TEXT)))
    assert not missing, f"observers docs/ARCHITECTURE.md does not name: {missing}"


def test_the_checks_see_names_and_paths() -> None:
    """The extraction itself: a renamed function and a moved file are caught, not silently skipped."""
    text = "`karpy.state.cluster.Cluster.nowhere` and `tests/state/test_gone.py` and `a b`"
    assert dotted_names(text) == ["karpy.state.cluster.Cluster.nowhere"]
    assert repository_paths(text) == ["tests/state/test_gone.py"]
    with pytest.raises(AssertionError, match="has no 'nowhere'"):
        resolve("karpy.state.cluster.Cluster.nowhere")
    with pytest.raises(AssertionError, match="no importable module"):
        resolve("karpy_elsewhere.module")
    assert len(dotted_names(TEXT)) > 100


NOT_IMPLEMENTED = re.compile(r"^\|(?P<upstream>[^|]+)\|\s*not implemented", re.MULTILINE)
SOURCES = sorted((ROOT / "controller" / "karpy").rglob("*.py"))


def claimed_missing(text: str) -> list[str]:
    """The upstream controllers a row of the document says karpy does not implement (`a/b`, `c/*`)."""
    return sorted({name for row in NOT_IMPLEMENTED.finditer(text) for name in CODE.findall(row["upstream"])})


def citations(upstream: str) -> list[str]:
    """karpy's source files that cite `upstream`'s code (`[pkg/controllers/]<upstream>/...`): code ported from it."""
    cited = re.compile(r"(?:controllers/|(?<![\w/.-]))" + re.escape(upstream.removesuffix("/*")) + r"/\w")
    return [str(path.relative_to(ROOT)) for path in SOURCES if cited.search(path.read_text())]


@pytest.mark.parametrize("upstream", claimed_missing(TEXT))
def test_what_the_document_calls_not_implemented_is_not_ported(upstream: str) -> None:
    """A controller ported since the document was written cites its upstream source: the row must name it instead."""
    assert not citations(upstream), (
        f"docs/ARCHITECTURE.md calls {upstream} not implemented, but {citations(upstream)} port it"
    )


def test_the_not_implemented_check_sees_a_ported_controller() -> None:
    text = "| `node/health` | not implemented (node repair) |\n| `nodepool/hash` | `karpy.nodepool` |"
    assert claimed_missing(text) == ["node/health"]
    assert "controller/karpy/nodeclaim/repair.py" in citations("node/health")
    assert "controller/karpy/nodeclaim/registration.py" in citations("nodepool/registrationhealth")
    assert claimed_missing(TEXT), "the document names no unimplemented controller: the check reads nothing"
