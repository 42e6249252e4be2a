"""Building blocks for CRD schemas: the paired CEL rule type, node builders, shared patterns, rendering."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

# Kubernetes resource.Quantity grammar as apimachinery writes it into CRDs.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Qualified name (optional DNS prefix + "/" + name), used for label and taint keys.
QUALIFIED_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
DURATION_OR_NEVER_PATTERN: Final = r"^(([0-9]+(s|m|h))+|Never)$"
DURATION_PATTERN: Final = r"^([0-9]+(s|m|h))+$"

Predicate = Callable[[Any], bool]
_OLD_SELF: Final = re.compile(r"\boldSelf\b")


@dataclass(frozen=True, slots=True)
class Rule:
    """One `x-kubernetes-validations` entry: upstream's CEL `rule` and `message`, and the Python `check` that
    implements it on the (defaulted, schema-valid) value at the same schema node. `check` is None for transition
    rules (those reading `oldSelf`): the API server enforces them on update; a parser of one object cannot (the
    emulated API server evaluates their CEL text, `karpy_emulator.apiserver.transitions`)."""

    rule: str
    message: str
    check: Predicate | None

    @property
    def is_transition(self) -> bool:
        """Whether the API server treats the rule as a transition rule: its expression reads `oldSelf`."""
        return _OLD_SELF.search(self.rule) is not None

    def render(self) -> dict[str, str]:
        return {"message": self.message, "rule": self.rule}


Schema = dict[str, Any]


def _node(type_: str | None, description: str, extra: Mapping[str, Any], rules: tuple[Rule, ...]) -> Schema:
    node: Schema = {}
    if description:
        node["description"] = description
    if type_ is not None:
        node["type"] = type_
    node.update({k: v for k, v in extra.items() if v is not None})
    if rules:
        node["x-kubernetes-validations"] = list(rules)
    return node


def string(
    description: str = "",
    *,
    pattern: str | None = None,
    enum: tuple[str, ...] | None = None,
    default: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    rules: tuple[Rule, ...] = (),
) -> Schema:
    extra = {
        "pattern": pattern,
        "enum": list(enum) if enum else None,
        "default": default,
        "minLength": min_length,
        "maxLength": max_length,
    }
    return _node("string", description, extra, rules)


def integer(
    description: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
    fmt: str | None = None,
    rules: tuple[Rule, ...] = (),
) -> Schema:
    extra = {"format": fmt, "minimum": minimum, "maximum": maximum, "default": default}
    return _node("integer", description, extra, rules)


def boolean(description: str = "") -> Schema:
    return _node("boolean", description, {}, ())


def array(
    items: Schema,
    description: str = "",
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    default: list[Any] | None = None,
    list_type: str | None = None,
    list_map_keys: tuple[str, ...] = (),
    array_string_keywords: Mapping[str, Any] | None = None,
    rules: tuple[Rule, ...] = (),
) -> Schema:
    """`array_string_keywords` are string keywords written on the array node itself, where upstream's CRDs have
    them: copied into the CRD for parity, enforced by nothing (they apply to strings only)."""
    extra = {
        "items": items,
        **dict(array_string_keywords or {}),
        "minItems": min_items,
        "maxItems": max_items,
        "default": default,
        "x-kubernetes-list-type": list_type,
        "x-kubernetes-list-map-keys": list(list_map_keys) or None,
    }
    return _node("array", description, extra, rules)


def obj(
    properties: Mapping[str, Schema],
    description: str = "",
    *,
    required: tuple[str, ...] = (),
    default: Mapping[str, Any] | None = None,
    rules: tuple[Rule, ...] = (),
) -> Schema:
    extra: dict[str, Any] = {"properties": dict(properties), "default": dict(default) if default is not None else None}
    if required:
        extra["required"] = list(required)
    return _node("object", description, extra, rules)


def string_map(
    description: str = "",
    *,
    values: Schema | None = None,
    max_properties: int | None = None,
    map_type: str | None = None,
    rules: tuple[Rule, ...] = (),
) -> Schema:
    extra = {
        "additionalProperties": values or {"type": "string"},
        "maxProperties": max_properties,
        "x-kubernetes-map-type": map_type,
    }
    return _node("object", description, extra, rules)


def open_object(description: str = "") -> Schema:
    """An object whose fields the API server keeps as they come (`x-kubernetes-preserve-unknown-fields`), at any
    depth: nothing in it is validated or pruned by the schema."""
    return _node(
        "object",
        description,
        {
            "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True},
            "x-kubernetes-preserve-unknown-fields": True,
        },
        (),
    )


def quantity(description: str = "") -> Schema:
    """A resource.Quantity field: an integer or a string in the quantity grammar."""
    return _node(
        None,
        description,
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        },
        (),
    )


def resource_list(description: str = "") -> Schema:
    return string_map(description, values=quantity())


def render(schema: Any) -> Any:
    """The manifest form of a schema: Rules become {message, rule} dicts; everything else is copied."""
    if isinstance(schema, Rule):
        return schema.render()
    if isinstance(schema, Mapping):
        return {key: render(value) for key, value in schema.items()}
    if isinstance(schema, list | tuple):
        return [render(item) for item in schema]
    return schema
