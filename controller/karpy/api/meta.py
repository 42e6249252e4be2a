"""Values shared by every v1 object: object metadata, conditions, taints, node selector requirements."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class _EmptyMapping(Mapping[str, str]):
    """A hashable, immutable empty mapping: Python 3.11 dataclasses refuse unhashable defaults (MappingProxyType)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> str:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0


EMPTY: Mapping[str, str] = _EmptyMapping()


class Operator(enum.StrEnum):
    """NodeSelectorRequirement operators; Gte/Lte were added in Karpenter v1.9."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"
    GTE = "Gte"
    LTE = "Lte"


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """The parts of metadata karpy reads. Timestamps are epoch seconds (the clock's unit)."""

    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = EMPTY
    annotations: Mapping[str, str] = EMPTY
    generation: int = 0
    resource_version: str = ""
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[Mapping[str, Any], ...] = ()
    generate_name: str = ""


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition; `status` is "True", "False" or "Unknown"."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: float | None = None
    observed_generation: int = 0

    @property
    def is_true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One requirement as written in a NodePool or NodeClaim; `min_values` is Karpenter's flexibility floor."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    min_values: int | None = None


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str
    kind: str
    name: str


def condition(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of that type, if present."""
    return next((c for c in conditions if c.type == type_), None)
