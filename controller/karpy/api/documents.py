"""Read multi-document YAML (or JSON) into plain JSON values, safely, as the API server's YAML decoding does.

One pass over libyaml's event stream (`yaml.CSafeLoader`; PyYAML's pure-Python parser when libyaml is missing)
builds the values directly, so that bounds are checked before anything large or deep exists:

* input: at most `MAX_BYTES`, UTF-8;
* nesting: at most `MAX_DEPTH` levels (libyaml's recursive composer overflows the C stack on deep input);
* aliases: go-yaml's rule against "billion laughs" (sigs.k8s.io/yaml, which kubectl and the API server use,
  decodes with it): once a document has expanded past 1,000 nodes, the share reached through aliases may be at
  most 99% up to 400,000 nodes and at most 10% from 4,000,000 nodes, linear in between;
* values are JSON's: a mapping key must be a scalar (its text is the key) and may appear once (kubectl's strict
  decoding refuses duplicate fields); timestamps stay strings, as sigs.k8s.io/yaml keeps them; `.inf`, `.nan`,
  binary and set/omap tags, and tags of our own making have no JSON form and are refused.

Aliased values are shared, not copied (as PyYAML shares them): readers must not mutate what they get.
Every problem is a `DocumentError` naming the line; nothing else escapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import yaml
from yaml import constructor, events, nodes, resolver

MAX_BYTES: Final = 50 * 1024 * 1024
"""Largest input read (50 MiB): enough for some 300,000 pods; reading it takes seconds, not minutes."""
MAX_DEPTH: Final = 128
"""Deepest nesting of mappings and sequences: Kubernetes objects nest about 15 levels (a pod's affinity terms)."""
_ALIAS_LOW, _ALIAS_HIGH = 400_000, 4_000_000
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LIBYAML: Final = _LOADER is not yaml.SafeLoader
"""Whether the libyaml C parser is in use (about 15 times faster than the pure-Python one)."""

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = (f"{_TAG}{t}" for t in ("str", "null", "bool", "int", "float"))
_TIMESTAMP, _MERGE, _VALUE = f"{_TAG}timestamp", f"{_TAG}merge", f"{_TAG}value"
_MAP, _SEQ = f"{_TAG}map", f"{_TAG}seq"
_IMPLICIT: Final = resolver.Resolver.yaml_implicit_resolvers
_CONSTRUCTORS: Final = constructor.SafeConstructor.yaml_constructors


class DocumentError(ValueError):
    """Input that is not a stream of YAML documents this reader accepts; the message names the line."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


@dataclass(frozen=True, slots=True)
class Document:
    index: int
    """1-based position in the stream (empty documents count)."""
    line: int
    """1-based line where the document starts."""
    body: Any
    """A plain value: dict (str keys), list, str, int, float, bool or None."""


@dataclass(slots=True)
class _Frame:
    """A mapping or sequence being built."""

    value: dict[str, Any] | list[Any]
    event: events.CollectionStartEvent
    """Where it starts: its anchor, and its line for errors."""
    size: int = 1
    """Nodes in the subtree once aliases are expanded (this node included)."""
    key: str | None = None
    expect_key: bool = True
    merges: list[dict[str, Any]] | None = None
    """What `<<` keys bring in, the winning mapping first (None until one does: most mappings merge nothing)."""


def allowed_alias_ratio(expanded: int) -> float:
    """go-yaml's bound on the share of a document's expanded nodes that may come from aliases."""
    if expanded <= _ALIAS_LOW:
        return 0.99
    if expanded >= _ALIAS_HIGH:
        return 0.10
    return 0.99 - 0.89 * (expanded - _ALIAS_LOW) / (_ALIAS_HIGH - _ALIAS_LOW)


def decode(data: bytes | str) -> str:
    """The text of `data`: at most MAX_BYTES, UTF-8 (a byte-order mark is dropped)."""
    size = len(data.encode() if isinstance(data, str) else data)
    if size > MAX_BYTES:
        raise DocumentError(f"{size} bytes is more than the {MAX_BYTES // (1024 * 1024)} MiB this reader accepts")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DocumentError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}", line=line) from exc


def load_all(data: bytes | str) -> list[Document]:
    """Every document of `data`, in order. Raises DocumentError (and nothing else) on input it refuses."""
    text = decode(data)
    loader = None
    try:
        loader = _LOADER(text)  # the pure-Python reader checks the characters here
        return _Builder().documents(loader.get_event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise DocumentError(f"invalid YAML: {problem}", line=mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:
        raise DocumentError(f"invalid YAML: {exc}") from exc
    finally:
        if loader is not None:
            loader.dispose()


class _Builder:
    """Builds the values of one stream from its events; the hot paths (scalars, appends) stay short."""

    def __init__(self) -> None:
        self._stack: list[_Frame] = []
        self._anchors: dict[str, tuple[Any, int]] = {}
        self._expanded = 0
        self._aliased = 0
        self._root: Any = None
        self._plain: dict[str, Any] = {}
        """Plain scalars already read (manifests repeat `v1`, `cpu`, `250m` thousands of times)."""
        self._handlers: dict[type[events.Event], Callable[[Any], None]] = {
            events.AliasEvent: self._alias,
            events.MappingStartEvent: self._open_mapping,
            events.SequenceStartEvent: self._open_sequence,
            events.MappingEndEvent: self._close,
            events.SequenceEndEvent: self._close,
        }

    def documents(self, next_event: Callable[[], events.Event | None]) -> list[Document]:
        """Every document built from the parser's events (`next_event` answers None at the end)."""
        out: list[Document] = []
        index, line = 0, 1
        handlers, scalar_event = self._handlers, events.ScalarEvent
        while (event := next_event()) is not None:
            kind = type(event)
            if kind is scalar_event:
                self._scalar(event)  # type: ignore[arg-type]  # the commonest event: no dictionary lookup
            elif (handle := handlers.get(kind)) is not None:
                handle(event)
            elif kind is events.DocumentStartEvent:
                index, line = index + 1, _line(event)
                self._anchors, self._expanded, self._aliased, self._root = {}, 0, 0, None
            elif kind is events.DocumentEndEvent:
                out.append(Document(index, line, self._root))
        return out

    # -- nodes ----------------------------------------------------------------------------------------------------

    def _add(self, value: Any, size: int, event: events.NodeEvent, key_text: str | None = None) -> None:
        """Place a finished node into its parent (or make it the document's root); `event` only for errors."""
        stack = self._stack
        if not stack:
            self._root = value
            return
        parent = stack[-1]
        parent.size += size
        container = parent.value
        if type(container) is list:
            container.append(value)
            return
        if parent.expect_key:
            if key_text is None:
                raise DocumentError("a mapping key must be a scalar", line=_line(event))
            parent.key, parent.expect_key = key_text, False
            return
        key, parent.key, parent.expect_key = parent.key, None, True
        assert key is not None
        assert isinstance(container, dict)
        if key is _MERGE_KEY:
            parent.merges = [*_merged(value, _line(event)), *(parent.merges or ())]  # later `<<` keys go first
        elif key in container:
            raise DocumentError(f"duplicate key {_short(key)!r} in a mapping", line=_line(event))
        else:
            container[key] = value

    def _scalar(self, event: events.ScalarEvent) -> None:
        # The hot path: most events are plain scalars already seen, placed into a list or as a key or value.
        text = event.value
        value = self._plain.get(text, _MISSING) if event.tag is None and event.implicit[0] else _MISSING
        if value is _MISSING:
            value = self._read_scalar(event)
        self._expanded += 1
        if self._aliased > 100:
            self._node(0, event)
        if event.anchor is not None:
            self._anchors[event.anchor] = (value, 1)
        stack = self._stack
        if not stack:
            self._add(_MERGE_TEXT if value is _MERGE_KEY else value, 1, event)
            return
        parent = stack[-1]
        container = parent.value
        if type(container) is list:
            parent.size += 1
            container.append(_MERGE_TEXT if value is _MERGE_KEY else value)
        elif parent.expect_key:
            parent.size += 1
            parent.key, parent.expect_key = (value if value is _MERGE_KEY else text), False
        elif value is _MERGE_KEY or parent.key is _MERGE_KEY or parent.key in container:
            self._add(_MERGE_TEXT if value is _MERGE_KEY else value, 1, event)  # merges and errors
        else:
            parent.size += 1
            container[parent.key] = value  # type: ignore[call-overload,index]  # a dict here: lists went first
            parent.key, parent.expect_key = None, True

    def _read_scalar(self, event: events.ScalarEvent) -> Any:
        text, tag = event.value, event.tag
        plain = event.implicit[0] and tag is None
        if tag is None or tag == "!":
            tag = _resolve(text) if event.implicit[0] else _STR
        value = _construct_scalar(tag, text, _line(event))
        if plain:
            if len(self._plain) >= _PLAIN_CACHE:
                self._plain.clear()
            self._plain[text] = value
        return value

    def _expects_key(self) -> bool:
        return bool(self._stack) and type(self._stack[-1].value) is dict and self._stack[-1].expect_key

    def _alias(self, event: events.AliasEvent) -> None:
        anchored = self._anchors.get(event.anchor or "")
        if anchored is None:
            raise DocumentError(f"found undefined alias {_short(event.anchor or '')!r}", line=_line(event))
        value, size = anchored
        self._aliased += size
        self._node(size, event)
        self._add(value, size, event, key_text=value if isinstance(value, str) else None)

    def _node(self, size: int, event: events.NodeEvent) -> None:
        """Count expanded nodes; refuse a document that aliases too much of itself (go-yaml's rule)."""
        self._expanded += size
        if (
            self._aliased > 100
            and self._expanded > 1000
            and self._aliased / self._expanded > allowed_alias_ratio(self._expanded)
        ):
            raise DocumentError("document contains excessive aliasing", line=_line(event))

    def _open(self, value: dict[str, Any] | list[Any], event: events.CollectionStartEvent, kind: str) -> None:
        stack = self._stack
        if event.tag is not None and event.tag not in ("!", kind):
            raise DocumentError(f"unsupported tag {_short(event.tag)}", line=_line(event))
        if len(stack) >= MAX_DEPTH:
            raise DocumentError(f"nested more than {MAX_DEPTH} levels deep", line=_line(event))
        if stack and stack[-1].expect_key and type(stack[-1].value) is dict:
            raise DocumentError("a mapping key must be a scalar", line=_line(event))
        self._expanded += 1
        if self._aliased > 100:
            self._node(0, event)
        stack.append(_Frame(value, event))

    def _open_mapping(self, event: events.MappingStartEvent) -> None:
        self._open({}, event, _MAP)

    def _open_sequence(self, event: events.SequenceStartEvent) -> None:
        self._open([], event, _SEQ)

    def _close(self, _: events.CollectionEndEvent) -> None:
        frame = self._stack.pop()
        value = frame.value
        if frame.merges is not None:
            merged: dict[str, Any] = {}
            for source in reversed(frame.merges):
                merged.update(source)
            merged.update(value)
            value = merged
        anchor = frame.event.anchor
        if anchor is not None:
            self._anchors[anchor] = (value, frame.size)
        self._add(value, frame.size, frame.event)


def _merged(value: Any, line: int) -> list[dict[str, Any]]:
    """The mappings a `<<` merge key brings in, the winning one first."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return list(value)
    raise DocumentError("a merge key (<<) takes a mapping or a list of mappings", line=line)


_MISSING: Final = object()
_PLAIN_CACHE: Final = 65_536
_SAFE: Final = constructor.SafeConstructor()
"""Only its scalar constructors run (stateless: they read the node they are given)."""


class _MergeKey(str):
    """The `<<` key of a mapping: a marker no document text can equal."""


_MERGE_KEY: Final = _MergeKey("<<")
_MERGE_TEXT: Final = "<<"
"""What `<<` is outside a key: text."""


def _resolve(value: str) -> str:
    """The tag a plain scalar resolves to (YAML 1.1's implicit resolvers, as PyYAML's SafeLoader has them)."""
    for tag, regexp in _IMPLICIT.get(value[:1] if value else "", ()):
        if regexp.match(value):
            return str(tag)
    return _STR


def _construct_scalar(tag: str, text: str, line: int) -> Any:
    if tag in (_STR, _TIMESTAMP, _VALUE):
        return text  # timestamps and "=" stay text, as sigs.k8s.io/yaml keeps them
    if tag == _MERGE:
        return _MERGE_KEY  # `<<` merges only as a key; elsewhere it is the text `<<`, as go-yaml reads it
    if tag not in (_NULL, _BOOL, _INT, _FLOAT):
        raise DocumentError(f"unsupported tag {_short(tag)}", line=line)
    try:
        # The class's own function for the tag, not construct_object: that one remembers every node it built.
        value = _CONSTRUCTORS[tag](_SAFE, nodes.ScalarNode(tag, text))
    except (ValueError, yaml.YAMLError) as exc:
        raise DocumentError(f"cannot read {_short(text)!r} as {tag.removeprefix(_TAG)}: {exc}", line=line) from exc
    if isinstance(value, float) and not math.isfinite(value):
        raise DocumentError(f"{_short(text)!r} is not a finite number (JSON has no infinity or NaN)", line=line)
    return value


def _line(event: events.Event) -> int:
    """1-based; computed only for errors."""
    return event.start_mark.line + 1 if event.start_mark is not None else 0


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
