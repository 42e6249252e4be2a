"""The one error type bad input produces: every problem, each with its field path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem, e.g. `spec.template.spec.requirements[2].operator: unsupported operator "Equals"`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class Problems:
    """Collects every problem with its field path instead of stopping at the first (the parsers' and checkers'
    common base)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))


class ValidationError(ValueError):
    """Raised by every parser in `karpy.api`; lists all problems found, not only the first."""

    def __init__(self, kind: str, name: str, problems: Sequence[Problem]) -> None:
        self.kind = kind
        self.name = name
        self.problems: tuple[Problem, ...] = tuple(problems)
        what = f"{kind} {name!r}" if name else kind
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {what}: {len(self.problems)} problem(s)\n{lines}")

    def summary(self) -> str:
        """The problems on one line (a status condition's message, a log field)."""
        return "; ".join(f"{p.path}: {p.message}" for p in self.problems) or str(self)
