"""The requirements algebra: node selector requirements as sets of label values (core: pkg/scheduling/requirement*.go).

A `Requirement` denotes a set of outcomes for one label key, where an outcome is either a label value (a string)
or *absence* of the label. The operators map to sets as Kubernetes node affinity defines them:

    In V          -> V
    NotIn V       -> (all strings − V) ∪ {absent}
    Exists        -> all strings
    DoesNotExist  -> {absent}
    Gt n / Lt n   -> strings that parse as an integer > n / < n   (Gte n == Gt n−1, Lte n == Lt n+1)

Representation (like upstream's complement + values + greaterThan/lessThan, plus an explicit absence bit so that
`NotIn` ∩ `Exists` is exact): `complement` says whether `values` are the excluded or the included strings; the
optional integer bounds restrict the string part to integers strictly inside (gt, lt); `absent` says whether a
node without the label satisfies it. Intersection is then exact set intersection, which the Hypothesis laws check.

Compatibility mirrors upstream `Requirements.Compatible`: keys the other side requires but we do not define are an
error unless the other side tolerates absence or the key is allowed to be undefined (well-known labels, which the
cloud provider fills in); keys both define must intersect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass
from typing import TypeVar, overload

from karpy.api import labels, meta

_T = TypeVar("_T")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_MAX_SHOWN_VALUES = 5

# Well-known labels may be undefined on a NodePool and still be satisfied: the cloud provider sets them
# (core: AllowUndefinedWellKnownLabels).
ALLOW_UNDEFINED_WELL_KNOWN: frozenset[str] = frozenset(labels.WELL_KNOWN_LABELS)


def _as_int(value: str) -> int | None:
    return int(value) if _INTEGER.match(value) else None


def _within(value: str, gt: int | None, lt: int | None) -> bool:
    if gt is None and lt is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return (gt is None or number > gt) and (lt is None or number < lt)


def _either(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    """`pick` (max or min) of the two bounds when both are set, the one that is set otherwise."""
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


@dataclass(frozen=True, slots=True)
class Requirement:
    """The allowed outcomes for one label key. Build with `Requirement.new`; values are canonical, so `==` is set
    equality for In/DoesNotExist forms and structural otherwise."""

    key: str
    complement: bool
    included_or_excluded: frozenset[str]
    gt: int | None = None
    lt: int | None = None
    absent: bool = False
    min_values: int | None = None

    # --- construction ---------------------------------------------------------------------------------------
    @staticmethod
    def new(
        key: str,
        operator: meta.Operator | str,
        *,
        values: Iterable[str] = (),
        min_values: int | None = None,
    ) -> Requirement:
        """The requirement `key operator values`; raises ValueError on a non-integer Gt/Lt/Gte/Lte operand."""
        key = labels.normalize_label(key)
        op = meta.Operator(operator)
        vals = frozenset(values)
        if op is meta.Operator.IN:
            return Requirement(key, False, vals, min_values=min_values)
        if op is meta.Operator.NOT_IN:
            return Requirement(key, True, vals, absent=True, min_values=min_values)
        if op is meta.Operator.EXISTS:
            return Requirement(key, True, frozenset(), min_values=min_values)
        if op is meta.Operator.DOES_NOT_EXIST:
            return Requirement(key, False, frozenset(), absent=True, min_values=min_values)
        if len(vals) != 1 or _as_int(next(iter(vals))) is None:
            raise ValueError(f"{key}: operator {op.value} needs exactly one integer value, got {sorted(vals)}")
        bound = int(next(iter(vals)))
        gt = {meta.Operator.GT: bound, meta.Operator.GTE: bound - 1}.get(op)
        lt = {meta.Operator.LT: bound, meta.Operator.LTE: bound + 1}.get(op)
        return Requirement(key, True, frozenset(), gt=gt, lt=lt, min_values=min_values)

    @staticmethod
    def exists(key: str) -> Requirement:
        return Requirement.new(key, meta.Operator.EXISTS)

    @staticmethod
    def in_(key: str, values: Iterable[str]) -> Requirement:
        # `new(key, In, values=values)` without its operator dispatch: every label of every node takes this path.
        return Requirement(labels.normalize_label(key), False, frozenset(values))

    # --- queries --------------------------------------------------------------------------------------------
    def has(self, value: str) -> bool:
        """Does a node labelled `key=value` satisfy this requirement?"""
        if not _within(value, self.gt, self.lt):
            return False
        return (value not in self.included_or_excluded) if self.complement else (value in self.included_or_excluded)

    def values(self) -> frozenset[str] | None:
        """The finite set of allowed label values when the requirement is an In (or DoesNotExist: empty)."""
        return None if self.complement else self.included_or_excluded

    def has_values(self) -> bool:
        """Is at least one label value (not absence) allowed?"""
        if not self.complement:
            return bool(self.included_or_excluded)
        if self.gt is not None and self.lt is not None:
            # Infinitely many strings spell each integer ("6", "06", ...), so finite exclusions cannot empty a
            # non-empty integer range.
            return self.gt + 1 < self.lt
        return True

    def is_empty(self) -> bool:
        """Nothing satisfies it: no label value and not absence either."""
        return not self.absent and not self.has_values()

    def any(self) -> str | None:
        """A deterministic value that satisfies it; None when only absence does or the set is unconstrained."""
        if not self.complement:
            return min(self.included_or_excluded) if self.included_or_excluded else None
        if self.gt is None and self.lt is None:
            return None
        if not self.has_values():
            return None
        excluded = self.included_or_excluded
        first = self.gt + 1 if self.gt is not None else (self.lt - 1 if self.lt is not None else 0)
        step = 1 if self.gt is not None else -1
        for offset in range(len(excluded) + 1):
            number = first + step * offset
            if not _within(str(number), self.gt, self.lt):
                break
            if str(number) not in excluded:
                return str(number)
        # Every plain spelling in range is excluded: zero-padded spellings of the same integer are not.
        padded = ("0" if first >= 0 else "-0") + str(abs(first))
        while padded in excluded:
            padded = padded.replace("0", "00", 1)
        return padded

    def operator(self) -> meta.Operator:
        """The closest single operator (upstream Requirement.Operator); bounded sets report Exists."""
        if not self.complement:
            return meta.Operator.IN if self.included_or_excluded else meta.Operator.DOES_NOT_EXIST
        if self.absent and self.included_or_excluded:
            return meta.Operator.NOT_IN
        return meta.Operator.EXISTS

    # --- algebra --------------------------------------------------------------------------------------------
    def intersection(self, other: Requirement) -> Requirement:
        """Outcomes allowed by both; min_values takes the larger floor."""
        gt = _either(max, self.gt, other.gt)
        lt = _either(min, self.lt, other.lt)
        absent = self.absent and other.absent
        min_values = _either(max, self.min_values, other.min_values)
        a, b = self.included_or_excluded, other.included_or_excluded
        if self.complement and other.complement:
            if gt is not None and lt is not None and gt + 1 >= lt:
                return Requirement(self.key, False, frozenset(), absent=absent, min_values=min_values)
            excluded = frozenset(v for v in a | b if _within(v, gt, lt))
            return Requirement(self.key, True, excluded, gt=gt, lt=lt, absent=absent, min_values=min_values)
        if self.complement:
            kept = frozenset(v for v in b - a if _within(v, gt, lt))
        elif other.complement:
            kept = frozenset(v for v in a - b if _within(v, gt, lt))
        else:
            kept = a & b
        return Requirement(self.key, False, kept, absent=absent, min_values=min_values)

    def with_min_values(self, min_values: int | None) -> Requirement:
        return Requirement(
            self.key, self.complement, self.included_or_excluded, self.gt, self.lt, self.absent, min_values
        )

    # --- rendering ------------------------------------------------------------------------------------------
    def to_node_selector(self) -> tuple[meta.NodeSelectorRequirement, ...]:
        """Node selector requirements whose conjunction denotes (a superset-free rendering of) this set."""
        mv = self.min_values
        if not self.complement:
            if self.included_or_excluded:
                vals = tuple(sorted(self.included_or_excluded))
                return (meta.NodeSelectorRequirement(self.key, meta.Operator.IN, vals, mv),)
            return (meta.NodeSelectorRequirement(self.key, meta.Operator.DOES_NOT_EXIST, (), mv),)
        out: list[meta.NodeSelectorRequirement] = []
        if self.gt is not None:
            out.append(meta.NodeSelectorRequirement(self.key, meta.Operator.GT, (str(self.gt),), mv))
        if self.lt is not None:
            out.append(meta.NodeSelectorRequirement(self.key, meta.Operator.LT, (str(self.lt),), mv))
        if self.included_or_excluded:
            vals = tuple(sorted(self.included_or_excluded))
            out.append(meta.NodeSelectorRequirement(self.key, meta.Operator.NOT_IN, vals, mv))
            if not self.absent and not out[:-1]:
                out.append(meta.NodeSelectorRequirement(self.key, meta.Operator.EXISTS, (), mv))
        elif not out:
            out.append(meta.NodeSelectorRequirement(self.key, meta.Operator.EXISTS, (), mv))
        return tuple(out)

    def __str__(self) -> str:
        op = self.operator()
        if op in (meta.Operator.EXISTS, meta.Operator.DOES_NOT_EXIST) and not self.included_or_excluded:
            text = f"{self.key} {op.value}"
        else:
            shown = sorted(self.included_or_excluded)
            if len(shown) > _MAX_SHOWN_VALUES:
                shown = [*shown[:_MAX_SHOWN_VALUES], f"and {len(shown) - _MAX_SHOWN_VALUES} others"]
            text = f"{self.key} {op.value} [{', '.join(shown)}]"
        if self.gt is not None:
            text += f" >{self.gt}"
        if self.lt is not None:
            text += f" <{self.lt}"
        if self.min_values is not None:
            text += f" minValues={self.min_values}"
        return text


class Requirements(Mapping[str, Requirement]):
    """An immutable mapping label key -> Requirement (the conjunction of its entries). Hashable."""

    __slots__ = ("_hash", "_reqs")

    def __init__(self, reqs: Iterable[Requirement] = ()) -> None:
        merged: dict[str, Requirement] = {}
        for req in reqs:
            existing = merged.get(req.key)
            merged[req.key] = req if existing is None else existing.intersection(req)
        self._reqs = merged
        self._hash: int | None = None

    # --- construction ---------------------------------------------------------------------------------------
    @staticmethod
    def from_node_selector(reqs: Iterable[meta.NodeSelectorRequirement]) -> Requirements:
        return Requirements(Requirement.new(r.key, r.operator, values=r.values, min_values=r.min_values) for r in reqs)

    @staticmethod
    def from_labels(node_labels: Mapping[str, str]) -> Requirements:
        return Requirements(Requirement.in_(k, (v,)) for k, v in node_labels.items())

    # --- mapping --------------------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    # The Mapping mixins go through __getitem__/KeyError; these are on every scheduling check, so use the dict's.
    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    @overload
    def get(self, key: str, /) -> Requirement | None: ...

    @overload
    def get(self, key: str, /, default: Requirement | _T) -> Requirement | _T: ...

    def get(self, key: str, /, default: object = None) -> object:
        return self._reqs.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._reqs.keys()

    def items(self) -> ItemsView[str, Requirement]:
        return self._reqs.items()

    def values(self) -> ValuesView[Requirement]:
        return self._reqs.values()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._reqs.values()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._reqs == other._reqs

    def __repr__(self) -> str:
        return f"Requirements({self})"

    def __str__(self) -> str:
        return ", ".join(sorted(str(r) for k, r in self._reqs.items() if k not in labels.RESTRICTED_LABELS))

    # --- algebra --------------------------------------------------------------------------------------------
    def intersect(self, other: Requirements) -> Requirements:
        """The conjunction of both (upstream Requirements.Add)."""
        if not other._reqs:
            return self
        if not self._reqs:
            return other
        return Requirements([*self._reqs.values(), *other._reqs.values()])

    def add(self, *reqs: Requirement) -> Requirements:
        return Requirements([*self._reqs.values(), *reqs])

    def without(self, key: str) -> Requirements:
        return Requirements(r for k, r in self._reqs.items() if k != key)

    def compatible(self, other: Requirements, *, allow_undefined: frozenset[str] = frozenset()) -> str | None:
        """None when a node meeting `self` can also meet `other`, else a reason naming each failing key.

        `other`'s keys that `self` does not define fail unless `other` tolerates the label's absence or the key is
        in `allow_undefined`; keys both define must share an outcome (a value, or absence).
        """
        problems: list[str] = []
        for key, incoming in other._reqs.items():
            existing = self._reqs.get(key)
            if existing is None:
                if key in allow_undefined or incoming.absent:
                    continue
                problems.append(f'label "{key}" does not have known values{self._hint(key, allow_undefined)}')
            elif existing.intersection(incoming).is_empty():
                problems.append(f"key {key}, {incoming} not in {existing}")
        return "; ".join(problems) if problems else None

    def intersects(self, other: Requirements) -> str | None:
        """Like `compatible` but keys defined on only one side are allowed (upstream Requirements.Intersects)."""
        everything = frozenset(other._reqs)
        return self.compatible(other, allow_undefined=everything)

    def admits(self, node_labels: Mapping[str, str]) -> bool:
        """Would a node with exactly these labels satisfy every requirement?"""
        for key, req in self._reqs.items():
            value = node_labels.get(key)
            if value is None:
                if not req.absent:
                    return False
            elif not req.has(value):
                return False
        return True

    def is_satisfiable(self) -> bool:
        return not any(r.is_empty() for r in self._reqs.values())

    def has_min_values(self) -> bool:
        return any(r.min_values is not None for r in self._reqs.values())

    def single_labels(self) -> dict[str, str]:
        """Labels a node created from these requirements certainly gets: keys with exactly one allowed value."""
        out: dict[str, str] = {}
        for key, req in self._reqs.items():
            vals = req.values()
            if vals is not None and len(vals) == 1 and not req.absent:
                out[key] = next(iter(vals))
        return out

    def to_node_selector(self) -> tuple[meta.NodeSelectorRequirement, ...]:
        return tuple(nsr for key in sorted(self._reqs) for nsr in self._reqs[key].to_node_selector())

    def _hint(self, key: str, allow_undefined: frozenset[str]) -> str:
        suffix = key.split("/", 1)[-1]
        for known in sorted(allow_undefined | frozenset(self._reqs)):
            if key in known or known.endswith("/" + suffix) or known == suffix:
                return f' (typo of "{known}"?)'
        return ""


EMPTY = Requirements()
