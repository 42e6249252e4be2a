"""JSON logs: one object per line with time, level, logger, message and the record's structured fields.

Reconcilers log upstream's messages ("created nodeclaim", "launched nodeclaim", ...) through stdlib logging with
`extra={"nodeclaim": ..., "nodepool": ...}`; this formatter lifts those extras into the object, so the fields are
searchable the way upstream's zap fields are. Secrets never reach a log line: `redact` masks them in settings.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, Final, TextIO

from karpy import settings as karpy_settings

_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
"""Attributes every LogRecord has: anything else on a record came from `extra=` and is a structured field."""
SECRET_MARKERS: Final = ("TOKEN", "SECRET", "PASSWORD", "CA_BUNDLE", "KEY")
"""Settings whose names contain one of these are logged as "<redacted>" (CLUSTER_CA_BUNDLE is long and private)."""
REDACTED: Final = "<redacted>"
LEVELS: Final[Mapping[karpy_settings.LogLevel, int]] = {
    karpy_settings.LogLevel.DEBUG: logging.DEBUG,
    karpy_settings.LogLevel.INFO: logging.INFO,
    karpy_settings.LogLevel.WARNING: logging.WARNING,
    karpy_settings.LogLevel.ERROR: logging.ERROR,
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return str(value)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in entry:
                entry[key] = _jsonable(value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))


def configure(level: karpy_settings.LogLevel, *, stream: TextIO | None = None) -> logging.Handler:
    """Route every logger (ours and Kopf's) through one JSON handler on stderr at LOG_LEVEL; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    for noisy in ("aiohttp.access", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, LEVELS[level]))
    return handler


def redact(effective: Mapping[str, object]) -> dict[str, object]:
    """Settings by env var with secrets masked (empty values stay visible: "not set" is useful to know)."""
    return {
        name: REDACTED if value and any(marker in name for marker in SECRET_MARKERS) else value
        for name, value in effective.items()
    }


def log_settings(settings: karpy_settings.Settings, logger: logging.Logger) -> None:
    logger.info("starting karpy with settings", extra={"settings": redact(settings.effective())})
