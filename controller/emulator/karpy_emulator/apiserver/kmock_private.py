"""Everything the emulated API server takes from kmock's private modules, in one place.

kmock 0.8 (pinned exactly in controller/emulator/pyproject.toml) leaves these out of its public API: `Response` (a
handler's reply with a status, headers and a streamed payload), `Bus` (the per-resource event bus watches read), its
bundled builtin resource list, and what `incoming` needs to make a `kmock.Request` itself: the request's constructor,
kmock's path parsing and action guess, and the error a failed stream is wrapped in. A kmock upgrade starts here: if
these moved, only this module changes.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.resources
from typing import Any, Final

import kmock
from kmock._internal import aiobus, parsing, rendering

KMOCK_VERSION: Final = "0.8"
"""The kmock release these names were read from (the pin of controller/emulator/pyproject.toml)."""

Response = rendering.Response
Bus = aiobus.Bus
Request = rendering.Request
StreamingError = rendering.StreamingError
parse_path = parsing.parse_path
guess_action = parsing.guess_k8s


def transport(request: kmock.Request) -> asyncio.Transport | None:
    """The connection `request` came on (kmock keeps aiohttp's request in a private field)."""
    raw = request._raw_request
    return raw.transport if raw is not None else None


def bundled_resources() -> bytes:
    """kmock's bundled builtin resource declarations (JSON), read without the deprecated
    `importlib.resources.read_binary` that kmock's own `load_bundled()` uses (a warning)."""
    return gzip.decompress(importlib.resources.files("kmock._internal").joinpath("resources.json.gz").read_bytes())


def stored_objects(objects: kmock.ObjectsArray) -> dict[Any, Any]:
    """kmock's dict behind `objects` (key: (resource, namespace, name), as the store writes them; value: kmock's
    `Object`): `objects[key]` parses its key on every call, which a LIST of 10,000 objects pays 10,000 times."""
    found: dict[Any, Any] = objects._objects
    return found


def latest(obj: Any) -> Any | None:
    """The latest entry of a kmock `Object`'s history: its live version, or None when it is soft-deleted (what
    `obj.deleted` and `obj.last` say, without their walk through kmock's sequence protocol, per object per LIST)."""
    items: list[Any] = obj._Object__history._ObjectHistory__items
    return items[-1] if items else None
