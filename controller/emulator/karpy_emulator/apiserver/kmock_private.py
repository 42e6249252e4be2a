"""Everything the emulated API server takes from kmock's private modules, in one place.

kmock 0.8 (pinned exactly in controller/emulator/pyproject.toml) leaves these out of its public API: `Response` (a
handler's reply with a status, headers and a streamed payload), `Bus` (the per-resource event bus watches read) and
its bundled builtin resource list. A kmock upgrade starts here: if these moved, only this module changes.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.resources
from typing import Final

import kmock
from kmock._internal import aiobus, rendering

KMOCK_VERSION: Final = "0.8"
"""The kmock release these names were read from (the pin of controller/emulator/pyproject.toml)."""

Response = rendering.Response
Bus = aiobus.Bus


def transport(request: kmock.Request) -> asyncio.Transport | None:
    """The connection `request` came on (kmock keeps aiohttp's request in a private field)."""
    raw = request._raw_request
    return raw.transport if raw is not None else None


def bundled_resources() -> bytes:
    """kmock's bundled builtin resource declarations (JSON), read without the deprecated
    `importlib.resources.read_binary` that kmock's own `load_bundled()` uses (a warning)."""
    return gzip.decompress(importlib.resources.files("kmock._internal").joinpath("resources.json.gz").read_bytes())
