"""The repository's one import-alias rule, its check and its rewrite (`python tools/import_aliases.py [--check]`).

The rule (docs/ARCHITECTURE.md, house style): import a module under its own name. Where that name clashes (with a
parameter, a local, or another import), alias it as its package's name joined to its own:
`from karpy.state import cluster as state_cluster`, `from karpy import clock as karpy_clock`,
`import botocore.exceptions as botocore_exceptions`. Besides that, only an explicit re-export (`import x as x`) and
the community spellings in `CONVENTIONAL` are allowed.

Run without arguments it rewrites every aliased import that breaks the rule, and every use of the old alias, in the
Python files of `ROOTS`; a file where the old alias is also a parameter or a local, or where the new one is already
taken, is reported and left alone (rename by hand). `--check` only lists what breaks the rule and exits 1 if any;
tests/test_import_aliases.py runs the same check.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent
ROOTS = ("controller", "tests", "bench", "tools", "infra")
SKIPPED_DIRECTORIES = frozenset({".venv", "__pycache__", "build", "node_modules"})

CONVENTIONAL = {
    ("", "numpy"): "np",
    ("", "numpy.typing"): "npt",
    ("hypothesis", "strategies"): "st",
    ("", "pulumi_aws"): "aws",
    ("", "pulumi_kubernetes"): "k8s",
    ("", "pulumi_docker_build"): "docker_build",
}
"""(from-module, imported name) → the alias its own community writes (numpy's and Pulumi's documentation)."""


@dataclass(frozen=True, slots=True)
class Alias:
    """One aliased import: `path:line`, the module it imports from, the imported name, its alias, the rule's."""

    path: pathlib.Path
    line: int
    column: int
    end_column: int
    source: str
    name: str
    alias: str
    expected: str

    def __str__(self) -> str:
        where = self.path.relative_to(REPOSITORY) if self.path.is_relative_to(REPOSITORY) else self.path
        imported = f"from {self.source} import {self.name}" if self.source else f"import {self.name}"
        return f"{where}:{self.line}: `{imported} as {self.alias}` should be `as {self.expected}`"


def expected_alias(source: str, name: str) -> str:
    """The alias the rule allows for `from source import name` (`source` "" for `import name`)."""
    if (source, name) in CONVENTIONAL:
        return CONVENTIONAL[(source, name)]
    parts = [*source.split("."), *name.split(".")] if source else name.split(".")
    parts = [p for p in parts if p]
    return "_".join(parts[-2:])


def python_files(roots: tuple[str, ...] = ROOTS) -> Iterator[pathlib.Path]:
    for root in roots:
        for path in sorted((REPOSITORY / root).rglob("*.py")):
            if not SKIPPED_DIRECTORIES.intersection(path.relative_to(REPOSITORY).parts):
                yield path


def _package_of(path: pathlib.Path, level: int) -> str:
    return ".".join(path.relative_to(REPOSITORY).parent.parts[-level:]) if level else ""


def aliases(path: pathlib.Path, tree: ast.Module) -> Iterator[Alias]:
    """Every aliased import of the file that breaks the rule."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or _package_of(path, node.level)
            if node.module and node.level:
                source = f"{_package_of(path, node.level)}.{node.module}"
            names = [(source, a) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [("", a) for a in node.names]
        else:
            continue
        for src, alias in names:
            if alias.asname is None or alias.asname == alias.name:
                continue  # plain, or an explicit re-export
            expected = expected_alias(src, alias.name)
            if alias.asname != expected:
                yield Alias(
                    path=path,
                    line=alias.lineno,
                    column=alias.col_offset,
                    end_column=alias.end_col_offset or alias.col_offset,
                    source=src,
                    name=alias.name,
                    alias=alias.asname,
                    expected=expected,
                )


def violations(roots: tuple[str, ...] = ROOTS) -> list[Alias]:
    found: list[Alias] = []
    for path in python_files(roots):
        found.extend(aliases(path, ast.parse(path.read_text(), filename=str(path))))
    return found


def _bound_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(every name used or bound anywhere, the names bound as parameters or by assignment inside functions)."""
    used: set[str] = set()
    local: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.arg):
            used.add(node.arg)
            local.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            used.add(node.name)
        elif isinstance(node, ast.alias):
            used.add(node.asname or node.name.split(".")[0])
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for node in ast.walk(function):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    local.add(node.id)
    return used, local


def rewrite(path: pathlib.Path) -> tuple[int, list[str]]:
    """Rewrite the file's rule-breaking aliases and their uses; returns (aliases rewritten, what was left alone)."""
    text = path.read_text()
    tree = ast.parse(text, filename=str(path))
    broken = list(aliases(path, tree))
    if not broken:
        return 0, []
    used, local = _bound_names(tree)
    lines = text.splitlines(keepends=True)
    skipped: list[str] = []
    done = 0
    edits: list[tuple[int, int, int, str]] = []  # (line, byte column, characters, new text)
    for found in broken:
        if found.alias in local:
            skipped.append(f"{found}: `{found.alias}` is also a parameter or a local here")
            continue
        if found.expected in used:
            skipped.append(f"{found}: `{found.expected}` is already taken here")
            continue
        used.add(found.expected)
        segment = lines[found.line - 1].encode()[found.column : found.end_column].decode()
        alias_at = found.column + len(segment.rsplit(found.alias, 1)[0].encode())
        edits.append((found.line, alias_at, len(found.alias), found.expected))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == found.alias:
                edits.append((node.lineno, node.col_offset, len(found.alias), found.expected))
        done += 1
    for line, column, length, new in sorted(edits, reverse=True):  # right to left keeps earlier offsets valid
        raw = lines[line - 1].encode()
        old = raw[column:].decode()[:length]
        lines[line - 1] = (raw[:column] + new.encode() + raw[column + len(old.encode()) :]).decode()
    path.write_text("".join(lines))
    return done, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only list the aliases that break the rule")
    parser.add_argument("paths", nargs="*", type=pathlib.Path, help="files to rewrite (default: all of ROOTS)")
    args = parser.parse_args(argv)
    if args.check:
        broken = violations()
        for found in broken:
            print(found)
        return 1 if broken else 0
    total, left = 0, []
    for path in [p.resolve() for p in args.paths] or list(python_files()):
        done, skipped = rewrite(path)
        total += done
        left.extend(skipped)
    print(f"rewrote {total} aliases; left {len(left)} for a hand rename")
    for line in left:
        print(line)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
