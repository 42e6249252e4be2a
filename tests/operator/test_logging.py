"""JSON logs: one object per line with structured fields; secrets redacted in the start-up settings line."""

from __future__ import annotations

import io
import json
import logging

from karpy import settings
from karpy.operator import logging as operator_logging


def test_one_json_object_per_line_with_extra_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(operator_logging.JSONFormatter())
    logger = logging.getLogger("karpy.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        logger.info("created nodeclaim", extra={"nodeclaim": "default-abc", "nodepool": "default", "pods": ["a/b"]})
        logger.debug("not shown")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["message"] == "created nodeclaim"
    assert entry["level"] == "info"
    assert entry["logger"] == "karpy.test.json"
    assert (entry["nodeclaim"], entry["nodepool"], entry["pods"]) == ("default-abc", "default", ["a/b"])
    assert entry["time"].endswith("+00:00")


def test_settings_are_logged_with_secrets_redacted() -> None:
    s = settings.Settings.from_env({"CLUSTER_NAME": "demo", "CLUSTER_CA_BUNDLE": "LS0tLS1CRUdJTi=="})
    shown = operator_logging.redact(s.effective())
    assert shown["CLUSTER_CA_BUNDLE"] == operator_logging.REDACTED
    assert shown["CLUSTER_NAME"] == "demo"
    assert shown["BATCH_MAX_DURATION"] == 10.0
    assert operator_logging.redact({"SOME_TOKEN": ""}) == {"SOME_TOKEN": ""}  # unset stays visible
