"""A small IAM identity-policy evaluator for the policy tests (no maintained Python evaluator handles these operators).

Covers what the controller policy uses: Action and Resource wildcards, StringEquals, StringLike,
StringEqualsIfExists, ForAllValues:StringEquals and Bool, multi-valued condition values (OR), several keys and
operators in one statement (AND), and explicit Deny over Allow over the implicit deny. Not a general engine.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class Decision(enum.StrEnum):
    ALLOWED = "allowed"
    EXPLICIT_DENY = "explicit-deny"
    IMPLICIT_DENY = "implicit-deny"


@dataclass(frozen=True, slots=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, str | Sequence[str]] = field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _glob(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM wildcards: `*` any run of characters (also across ':'), `?` one character; `[` is literal (not fnmatch)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case_sensitive else re.IGNORECASE) is not None


def _context_values(request: Request, key: str) -> list[str] | None:
    for name, value in request.context.items():
        if name.lower() == key.lower():  # condition keys are case-insensitive
            return [str(v) for v in _as_list(value)]
    return None


def _condition_holds(operator: str, key: str, expected: Any, request: Request) -> bool:
    wanted = [str(v) for v in _as_list(expected)]
    present = _context_values(request, key)
    if operator.startswith("ForAllValues:"):
        inner = operator.removeprefix("ForAllValues:")
        if present is None:
            return True  # vacuously true, as in IAM
        return all(
            _condition_holds(inner, key, expected, Request(request.action, request.resource, {key: v})) for v in present
        )
    if operator.endswith("IfExists"):
        if present is None:
            return True
        operator = operator.removesuffix("IfExists")
    if present is None:
        return False
    if operator == "StringEquals":
        return any(v == w for v in present for w in wanted)
    if operator == "StringLike":
        return any(_glob(w, v) for v in present for w in wanted)
    if operator == "Bool":
        return any(v.lower() == w.lower() for v in present for w in wanted)
    raise NotImplementedError(f"condition operator {operator}")


def _matches(statement: Mapping[str, Any], request: Request) -> bool:
    if not any(_glob(a, request.action, case_sensitive=False) for a in _as_list(statement["Action"])):
        return False
    if not any(_glob(r, request.resource) for r in _as_list(statement["Resource"])):
        return False
    conditions: Mapping[str, Mapping[str, Any]] = statement.get("Condition", {})
    return all(
        _condition_holds(operator, key, expected, request)
        for operator, block in conditions.items()
        for key, expected in block.items()
    )


def evaluate(documents: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    allowed = False
    for doc in documents:
        for statement in doc["Statement"]:
            if _matches(statement, request):
                if statement["Effect"] == "Deny":
                    return Decision.EXPLICIT_DENY
                allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY
