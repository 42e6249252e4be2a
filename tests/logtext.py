"""Log records as people read them: through the default `logging.Formatter` (what a plain handler or Python's
last-resort handler prints: the message, no `extra=` fields; a bench's or a test's stderr) and through `karpy run`'s
JSON formatter (the message and the extras). A failure's error must show in both."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from karpy.operator import logging as operator_logging


def plain(record: logging.LogRecord) -> str:
    return logging.Formatter().format(record)


def as_json(record: logging.LogRecord) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(operator_logging.JSONFormatter().format(record))
    return entry


def starting(caplog: pytest.LogCaptureFixture, prefix: str) -> list[logging.LogRecord]:
    """The captured records whose message starts with `prefix`."""
    return [r for r in caplog.records if r.getMessage().startswith(prefix)]
