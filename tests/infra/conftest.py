"""Shared builders for the infra tests: policy contexts, a parliament loader and the `pulumi_run` fixture."""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.resources
import sys
import types
import warnings
from collections.abc import Iterator

import pulumi
import pulumi.runtime.mocks
import pytest

from pulumi_karpy import policy

# The mocks live in .mocks (no pytest there: a stack's own virtualenv runs them too); re-exported for the tests.
from .mocks import ACCOUNT, NODE_GROUPS, REGION, Deployment, Mocks, Recorded, RecordingMonitor, Run, run_program

__all__ = ["ACCOUNT", "NODE_GROUPS", "REGION", "Deployment", "Mocks", "Recorded", "RecordingMonitor", "Run"]


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


@pytest.fixture(scope="session", autouse=True)
def _pulumi_aws_ec2_imported() -> None:
    """pulumi_aws.ec2.encryption_control warns when imported (a deprecated resource we never use); the engine
    imports it while resolving ec2 resources, so it is imported quietly once here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"aws\.ec2/encryptioncontrol", category=DeprecationWarning)
        importlib.import_module("pulumi_aws.ec2.encryption_control")


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


_PULUMI_LOOPS: list[asyncio.AbstractEventLoop] = []


@pytest.fixture
def pulumi_run() -> Iterator[Run]:
    """Run a program under Pulumi's mocks (set here, never at import) and return what it declared.

    `pulumi.runtime.test` drives its work with `asyncio.get_event_loop()`, which raises once an earlier asyncio test
    (pytest-asyncio) has unset the main thread's loop; such a test run gets a fresh loop set for the thread. It is
    not closed here: Pulumi keeps callbacks scheduled on it past the end of a program. It is kept referenced for the
    life of the process (`_PULUMI_LOOPS`): left to the garbage collector it would warn (an error here) inside whichever
    later test collected it, which on parallel workers is an unrelated test. Where no loop was ever set, Python 3.12
    and 3.13 warn (DeprecationWarning, before creating one implicitly) instead of raising: the warning, raised here,
    takes the same path, so no untracked loop is created.
    """
    policy_ = asyncio.get_event_loop_policy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            policy_.get_event_loop()
    except (RuntimeError, DeprecationWarning):
        loop = policy_.new_event_loop()
        _PULUMI_LOOPS.append(loop)
        policy_.set_event_loop(loop)

    yield run_program
    pulumi.runtime.set_all_config({})
