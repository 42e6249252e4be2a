"""Kubernetes `Status` bodies and the one error type the emulator's handlers raise to answer with one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Cause:
    """One entry of `details.causes`: what the real API server reports per invalid field or refused budget."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def body(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


class ApiError(Exception):
    """A refused request; rendered as a `Status` with `code` as the HTTP status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        list_meta: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})
        self.list_meta = dict(list_meta or {})

    def body(self) -> dict[str, Any]:
        return failure(self.code, self.reason, self.message, details=self.details, list_meta=self.list_meta)


def failure(
    code: int,
    reason: str,
    message: str,
    *,
    details: Mapping[str, Any] | None = None,
    list_meta: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A `Status`; `list_meta` is its ListMeta (a 410 to a paginated LIST carries a continue token there)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(list_meta or {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return body


def success(*, code: int = 200, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        body["details"] = dict(details)
    return body


def qualified(plural: str, group: str) -> str:
    """`pods`, `nodeclaims.karpenter.sh`: how the API server names a resource in its messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        details={"name": name, "group": group, "kind": plural},
    )


def resource_not_found(path: str) -> ApiError:
    return ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        details={"name": name, "group": group, "kind": plural},
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: Sequence[Cause]) -> ApiError:
    """422 as the API server answers a schema, CEL or immutability violation."""
    summary = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    return ApiError(
        422,
        "Invalid",
        f'{kind}.{group} "{name}" is invalid: {summary}' if group else f'{kind} "{name}" is invalid: {summary}',
        details={"name": name, "group": group, "kind": kind, "causes": [c.body() for c in causes]},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")
