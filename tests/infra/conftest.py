"""Shared builders for the infra tests: policy contexts and a parliament loader."""

from __future__ import annotations

import gc
import importlib
import importlib.resources
import sys
import types
import warnings
from collections.abc import Iterator

import pytest

from pulumi_karpy import policy

ACCOUNT = "123456789012"


def make_context(
    *, partition: str = "aws", region: str = "us-west-2", cluster: str = "demo", queue: bool = True
) -> policy.PolicyContext:
    return policy.PolicyContext(
        partition=partition,
        region=region,
        account_id=ACCOUNT,
        cluster_name=cluster,
        node_role_arn=f"arn:{partition}:iam::{ACCOUNT}:role/{cluster}-node",
        queue_arn=f"arn:{partition}:sqs:{region}:{ACCOUNT}:{cluster}" if queue else None,
    )


@pytest.fixture(scope="session")
def parliament() -> Iterator[types.ModuleType]:
    """parliament 1.6 still imports `pkg_resources` (setuptools), which the locked venv does not ship.

    It only calls `resource_filename`, so a two-line stand-in is installed for the import and removed afterwards
    (setuptools would be the proper fix: reported, not changed here).
    """
    shimmed = False
    try:
        importlib.import_module("pkg_resources")
    except ImportError:
        shim = types.ModuleType("pkg_resources")
        shim.resource_filename = lambda package, name: str(importlib.resources.files(package) / name)  # type: ignore[attr-defined]
        sys.modules["pkg_resources"] = shim
        shimmed = True
    try:
        with warnings.catch_warnings():
            # Third-party import noise, not ours: parliament reads its bundled JSON/YAML with open() and never
            # closes the files (ResourceWarning), and its regexes use invalid escapes (SyntaxWarning when compiled).
            warnings.simplefilter("ignore")
            module = importlib.import_module("parliament")
            gc.collect()
        yield module
    finally:
        if shimmed:
            del sys.modules["pkg_resources"]
