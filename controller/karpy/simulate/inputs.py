"""Where manifests come from: files, directories (read recursively, as `kubectl apply -R -f`) and standard input
(`-f -`, so `helm template ... | karpy simulate -f -` and `kustomize build ... | karpy simulate -f -` work).

Reading only: what the bytes hold is `manifests`' business. Every problem is a `manifests.InputError`-compatible
`InputError` naming the path as given.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

STDIN: Final = "-"
"""The path that stands for standard input, as kubectl spells it."""
STDIN_NAME: Final = "<stdin>"
"""What messages call standard input."""
YAML_SUFFIXES: Final = (".yaml", ".yml", ".json")


class InputError(ValueError):
    """Input that cannot be read; the message names the path."""


@dataclass(frozen=True, slots=True)
class Source:
    """One file (or standard input) to read: `name` is what messages call it."""

    name: str
    path: Path | None = None
    """None: standard input."""

    def read(self, *, stdin: BinaryIO | None = None, limit: int) -> bytes | None:
        """The bytes; None when there are more than `limit` (a file that large is not read)."""
        try:
            if self.path is None:
                data = (stdin if stdin is not None else sys.stdin.buffer).read(limit + 1)
            elif self.path.stat().st_size > limit:
                return None
            else:
                data = self.path.read_bytes()
        except OSError as exc:
            raise InputError(f"{self.name}: {exc.strerror or exc}") from exc
        return data if len(data) <= limit else None


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def expand(paths: Iterable[str]) -> list[Source]:
    """Files as given; directories as the YAML and JSON files anywhere under them, hidden ones (`.git`) left out, in
    path order (so numbered files apply in order); `-` as standard input, at most once."""
    given = list(paths)
    out: list[Source] = []
    for raw in given:
        if raw == STDIN:
            if any(s.path is None for s in out):
                raise InputError("-: standard input can be read only once")
            out.append(Source(STDIN_NAME))
            continue
        path = Path(raw)
        try:
            if path.is_dir():
                found = (p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES and not _hidden(p, path))
                out.extend(Source(str(p), p) for p in sorted(found, key=lambda p: p.relative_to(path).parts))
            elif path.is_file():
                out.append(Source(raw, path))
            else:
                raise InputError(f"{raw}: no such file or directory")
        except OSError as exc:
            raise InputError(f"{raw}: {exc.strerror or exc}") from exc
    files = [s for s in out if s.path is None or s.path.is_file()]
    if not files:
        raise InputError(f"no manifests found in {', '.join(given)} (files ending in {', '.join(YAML_SUFFIXES)})")
    return files
