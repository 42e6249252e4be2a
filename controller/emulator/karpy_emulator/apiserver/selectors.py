"""Label and field selectors as the API server reads them from `?labelSelector=` / `?fieldSelector=`.

Label syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a` (exists), `!a` (does not exist), `a>1`,
`a<1`. Field syntax: dotted paths with `=`, `==`, `!=`; a missing field compares as "". Bad syntax raises
`SelectorError` (the server answers 400).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    pass


class LabelOp(enum.StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER = ">"
    LESS = "<"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    op: LabelOp
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.op:
            case LabelOp.EQUALS | LabelOp.IN:
                return present and value in self.values
            case LabelOp.NOT_EQUALS | LabelOp.NOT_IN:
                return not present or value not in self.values
            case LabelOp.EXISTS:
                return present
            case LabelOp.DOES_NOT_EXIST:
                return not present
            case LabelOp.GREATER | LabelOp.LESS:
                return present and _compare_int(value, next(iter(self.values)), greater=self.op is LabelOp.GREATER)


def _compare_int(value: str, bound: str, *, greater: bool) -> bool:
    try:
        number = int(value)
    except ValueError:
        return False
    return number > int(bound) if greater else number < int(bound)


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_TERM = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_TERM = re.compile(rf"^\s*({_KEY})\s*(==|!=|=|>|<)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_TERM = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses: `a in (x,y),b` -> [`a in (x,y)`, `b`]."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_labels(text: str) -> tuple[LabelRequirement, ...]:
    requirements: list[LabelRequirement] = []
    for term in _split_top_level(text):
        if match := _SET_TERM.match(term):
            key, op, raw_values = match.groups()
            values = frozenset(v.strip() for v in raw_values.split(",") if v.strip())
            requirements.append(LabelRequirement(key, LabelOp(op), values))
        elif match := _CMP_TERM.match(term):
            key, op, value = match.groups()
            if op in (">", "<") and not re.fullmatch(r"-?\d+", value):
                raise SelectorError(f"invalid label selector {text!r}: {op} needs an integer, got {value!r}")
            label_op = LabelOp.EQUALS if op == "==" else LabelOp(op)
            requirements.append(LabelRequirement(key, label_op, frozenset([value])))
        elif match := _EXISTS_TERM.match(term):
            negated, key = match.groups()
            requirements.append(LabelRequirement(key, LabelOp.DOES_NOT_EXIST if negated else LabelOp.EXISTS))
        else:
            raise SelectorError(f"invalid label selector {text!r}: cannot parse {term.strip()!r}")
    return tuple(requirements)


def labels_match(requirements: Sequence[LabelRequirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)


def from_label_selector(selector: Mapping[str, Any]) -> tuple[LabelRequirement, ...]:
    """A `metav1.LabelSelector` object (matchLabels + matchExpressions) as requirements."""
    requirements = [
        LabelRequirement(k, LabelOp.EQUALS, frozenset([v])) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    operators = {
        "In": LabelOp.IN,
        "NotIn": LabelOp.NOT_IN,
        "Exists": LabelOp.EXISTS,
        "DoesNotExist": LabelOp.DOES_NOT_EXIST,
    }
    for expression in selector.get("matchExpressions") or ():
        operator = expression.get("operator")
        if operator not in operators:
            raise SelectorError(f"matchExpressions: unsupported operator {operator!r}")
        values = frozenset(expression.get("values") or ())
        requirements.append(LabelRequirement(expression.get("key", ""), operators[operator], values))
    return tuple(requirements)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negated


def field_value(obj: Mapping[str, Any], path: Sequence[str]) -> str:
    """The field at `path` as the API server compares it: missing is "", booleans are lowercase."""
    current: Any = obj
    for part in path:
        # `type(...) is dict` first: the stored JSON trees are plain dicts, and an ABC check per step of every
        # object's path was most of a filtered LIST's cost
        if not (type(current) is dict or isinstance(current, Mapping)) or part not in current:
            return ""
        current = current[part]
    if type(current) is str:
        return current
    if isinstance(current, bool):
        return "true" if current else "false"
    return "" if current is None or isinstance(current, Mapping | list) else str(current)


_FIELD_TERM = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$")


def parse_fields(text: str) -> tuple[FieldRequirement, ...]:
    requirements: list[FieldRequirement] = []
    for term in re.split(r"(?<!\\),", text):
        if not term.strip():
            continue
        match = _FIELD_TERM.match(term)
        if match is None:
            raise SelectorError(f"invalid field selector {text!r}: cannot parse {term.strip()!r}")
        path, op, value = match.groups()
        requirements.append(FieldRequirement(tuple(path.split(".")), value.replace("\\,", ","), op == "!="))
    return tuple(requirements)


def fields_match(requirements: Sequence[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    return all(r.matches(obj) for r in requirements)
