"""Watch events as the API server streams them to a filtered watch (pure parts).

An object that starts matching a watch's selectors arrives as ADDED, one that stops matching as DELETED, the way
the real API server's watch cache filters them. Streams are sent as `frame`s around the object's JSON, which the
store encodes once per write however many watchers see it (as the real watch cache does).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy_emulator.apiserver import selectors


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class Change:
    """One stored write: the object after it (before it for DELETED) and, on MODIFIED, the object before."""

    type: EventType
    resource_version: int
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None = None
    encoded: bytes = b""
    """`obj` as JSON (see `encode`)."""


@dataclass(frozen=True, slots=True)
class Filter:
    namespace: str | None = None
    name: str | None = None
    labels: tuple[selectors.LabelRequirement, ...] = field(default=())
    fields: tuple[selectors.FieldRequirement, ...] = field(default=())

    @property
    def by_namespace_only(self) -> bool:
        """Nothing but the namespace (if any) selects: a LIST is the namespace's range of the store, unfiltered."""
        return self.name is None and not self.labels and not self.fields

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.name is not None and meta.get("name") != self.name:
            return False
        if self.labels and not selectors.labels_match(self.labels, meta.get("labels") or {}):
            return False
        return not self.fields or selectors.fields_match(self.fields, obj)


def event(type_: EventType, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": str(type_), "object": obj}


def encode(obj: Any) -> bytes:
    """JSON as the server sends it (`json.dumps` defaults, as aiohttp's and kmock's responses)."""
    return json.dumps(obj).encode()


def frame(type_: EventType, encoded: bytes) -> bytes:
    """One line of a watch stream: the event of type `type_` around an object already `encode`d."""
    return b'{"type": "' + type_.value.encode() + b'", "object": ' + encoded + b"}\n"


def visible(change: Change, watch: Filter) -> EventType | None:
    """The type of the event `watch` sees for `change`, or None when the change is invisible to it."""
    now = watch.matches(change.obj)
    if change.type is not EventType.MODIFIED:
        return change.type if now else None
    before = change.old is not None and watch.matches(change.old)
    if now and before:
        return EventType.MODIFIED
    if now:
        return EventType.ADDED
    if before:
        return EventType.DELETED
    return None


def initial_events_end(resource_version: int, api_version: str, kind: str) -> dict[str, Any]:
    """The bookmark closing `sendInitialEvents=true` (Kopf's and client-go's streaming lists)."""
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "resourceVersion": str(resource_version),
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    return event(EventType.BOOKMARK, obj)


def expired(resource_version: str) -> dict[str, Any]:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {resource_version}",
        "reason": "Expired",
        "code": 410,
    }
    return event(EventType.ERROR, status)
