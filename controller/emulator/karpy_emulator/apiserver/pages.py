"""Paginated LISTs (`?limit=` and `?continue=`) as the API server serves them: each page resumes after the key the
previous one ended on, so a page costs its own size, not the whole list's.

The continue token has upstream's shape (k8s.io/apiserver/pkg/storage/continue.go, `EncodeContinue`): base64url
(no padding) of `{"v": "meta.k8s.io/v1", "rv": <the first page's resourceVersion>, "start": <last key + NUL>}`, the
key being `namespace/name` (just `name` when cluster-scoped). Every page reports the first page's resourceVersion,
as a real server's pages all carry their snapshot's; a client that watches from it gets the later changes replayed.
A token that cannot be read is a 400, as the real server answers it.

A token whose resourceVersion the store no longer holds (its history compacted past it, as etcd compacts) is a 410
Expired carrying a fresh token in its ListMeta: the same start key with resourceVersion -1, which continues the list
at the latest version, inconsistently (k8s.io/apiserver/pkg/storage/etcd3/errors.go,
`handleCompactedErrorForPaging`). client-go's pager then either lists again from the start or takes that token.
Unlike etcd, the emulator reads a continued page from the live objects, not from a snapshot at the token's version:
an object written since the first page is listed as it is now, and the watch from the list's resourceVersion
replays that write.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from karpy_emulator.apiserver import api_status, ordered

_VERSION: Final = "meta.k8s.io/v1"
LATEST: Final = "-1"
"""A token's resourceVersion that continues at the latest version (what a 410's fresh token carries)."""
_INCONSISTENT: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a page starts: after `position`, in the list as of `resource_version` (`LATEST`: as of now)."""

    position: ordered.Position
    resource_version: str

    @property
    def latest(self) -> bool:
        return self.resource_version == LATEST

    @property
    def revision(self) -> int:
        return int(self.resource_version)


def token(position: ordered.Position, resource_version: str) -> str:
    """The continue token of a page that ended on `position`."""
    namespace, name = position
    start = f"{namespace}/{name}\0" if namespace else f"{name}\0"
    document = {"v": _VERSION, "rv": int(resource_version), "start": start}
    return base64.urlsafe_b64encode(json.dumps(document, separators=(",", ":")).encode()).rstrip(b"=").decode()


def resume(continue_: str) -> Resume:
    """Where the page asked for with `continue_` starts; `api_status.ApiError` 400 when the token is not one."""
    try:
        raw = base64.urlsafe_b64decode(continue_ + "=" * (-len(continue_) % 4))
        document: Any = json.loads(raw)
    except (binascii.Error, ValueError) as error:
        raise api_status.bad_request(f"invalid continue token: {error}") from error
    if not isinstance(document, dict) or document.get("v") != _VERSION:
        raise api_status.bad_request(f"invalid continue token: not a {_VERSION} continue token")
    start, version = document.get("start"), document.get("rv")
    if not isinstance(start, str) or not start.endswith("\0") or not isinstance(version, int) or version < -1:
        raise api_status.bad_request("invalid continue token: no start key and resourceVersion")
    if version == 0:  # continue.go's ErrInvalidStartRV: 0 is no version, -1 the latest
        raise api_status.bad_request("invalid continue token: incorrect encoded start resourceVersion")
    namespace, _, name = start[:-1].rpartition("/")
    return Resume((namespace, name), str(version))


def expired(resumed: Resume) -> api_status.ApiError:
    """The 410 for a token whose version is compacted: the fresh token continues after the same key, at the latest
    version (etcd3/errors.go, `handleCompactedErrorForPaging`)."""
    fresh = token(resumed.position, LATEST)
    return api_status.ApiError(410, "Expired", _INCONSISTENT, list_meta={"continue": fresh})


def page(keys: Iterable[T], *, limit: int) -> tuple[list[T], bool]:
    """The first `limit` of `keys` (all of them when `limit` is 0), and whether more followed: reads one past the
    page, no further."""
    taken: list[T] = []
    for key in keys:
        if limit and len(taken) == limit:
            return taken, True
        taken.append(key)
    return taken, False
