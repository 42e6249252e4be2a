"""The `KubeClient` protocol the reconcilers and the state informers use, its errors and value types.

No HTTP here (that is `rest`); errors are classified once, from the API server's `Status` body, so callers branch
on exception types (`except client.Conflict`) and never on message strings.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from karpy.kube import resources


class EvictionOutcome(enum.StrEnum):
    EVICTED = "Evicted"
    BLOCKED = "Blocked"  # 429: a PodDisruptionBudget allows no disruption now; retry later, never bypass
    NOT_FOUND = "NotFound"  # 404: the pod is already gone
    FAILED = "Failed"  # 500 (the pod matches several budgets) or any other refusal


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # "ADDED" | "MODIFIED" | "DELETED"
    object: Mapping[str, Any]


ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class KubeError(Exception):
    """A request the API server refused; `status` is the HTTP code, `reason` the Status reason."""

    def __init__(self, status: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = dict(details or {})


class NotFound(KubeError):
    """404."""


class Conflict(KubeError):
    """409: a stale resourceVersion, a failed precondition, or (subclass) a name already taken."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists."""


class Invalid(KubeError):
    """422: admission refused the object; `causes` lists (field, message) pairs."""

    @property
    def causes(self) -> list[tuple[str, str]]:
        return [(str(c.get("field", "")), str(c.get("message", ""))) for c in self.details.get("causes") or ()]


class Expired(KubeError):
    """410: the resourceVersion a watch or list asked for is compacted; re-list."""


class TooManyRequests(KubeError):
    """429: throttled by the API server (or, on eviction, refused by a budget)."""


class Disconnected(KubeError):
    """No answer: the connection failed, was reset or timed out (`status` 0). A write may or may not have been
    applied; callers handle it as any failed request (client-go returns the transport's error the same way)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Disconnected", message)


_BY_STATUS: Mapping[int, type[KubeError]] = {
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_status(status: int, body: Any) -> KubeError:
    """The `KubeError` subclass for an HTTP status and its (possibly missing or non-JSON) `Status` body."""
    status_body: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = status_body.get("code")
    code = code if isinstance(code, int) and code >= 400 else status  # a watch ERROR event carries its code
    reason = str(status_body.get("reason") or "")
    message = str(status_body.get("message") or (body if isinstance(body, str) and body else f"HTTP {code}"))
    details = status_body.get("details") if isinstance(status_body.get("details"), Mapping) else None
    cls = AlreadyExists if code == 409 and reason == "AlreadyExists" else _BY_STATUS.get(code, KubeError)
    if code == 410 and not reason:
        reason = "Expired"
    return cls(code, reason or "Unknown", message, details=details)


Patch = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A patch body: a mapping is a JSON merge patch (RFC 7386), a sequence a JSON patch (RFC 6902)."""


class KubeClient(Protocol):
    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """Every matching object and the list's resourceVersion (to start a watch from)."""
        ...

    def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[WatchEvent]:
        """Changes after `resource_version` until the server ends the stream; raises `Expired` on 410."""
        ...

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]: ...

    async def patch(
        self, res: resources.Resource, name: str, patch: Patch, *, namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        """A mapping is a JSON merge patch (RFC 7386), a sequence a JSON patch (RFC 6902)."""
        ...

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        """True when the request was accepted, False when the object was already gone."""
        ...

    async def evict(self, namespace: str, name: str) -> EvictionOutcome: ...

    async def bind(self, namespace: str, name: str, node: str) -> None: ...


def eviction_body(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}


def binding_body(namespace: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def eviction_outcome(status: int) -> EvictionOutcome:
    """How the Eviction API's HTTP status reads (upstream terminator/eviction.go)."""
    if status in (200, 201):
        return EvictionOutcome.EVICTED
    if status == 429:
        return EvictionOutcome.BLOCKED
    if status == 404:
        return EvictionOutcome.NOT_FOUND
    return EvictionOutcome.FAILED


async def aclose(stream: AsyncIterator[Any]) -> None:
    """Close a watch stream left early (async generators hold an HTTP response until closed)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
