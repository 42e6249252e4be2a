"""Every aliased import in the repository follows the one alias rule of docs/ARCHITECTURE.md (house style)."""

from __future__ import annotations

import ast
import pathlib

import pytest
from tools import import_aliases


def test_every_alias_follows_the_rule() -> None:
    broken = import_aliases.violations()
    assert not broken, "run `python tools/import_aliases.py` to rewrite:\n" + "\n".join(map(str, broken))


@pytest.mark.parametrize(
    ("source", "alias", "rule"),
    [
        ("from karpy import clock as clock_mod", "clock_mod", "karpy_clock"),
        ("from karpy.state import cluster as cluster_module", "cluster_module", "state_cluster"),
        ("from tests.nodeclaim import builders as b", "b", "nodeclaim_builders"),
        ("import botocore.exceptions as errors", "errors", "botocore_exceptions"),
        ("import numpy as numeric", "numeric", "np"),
    ],
)
def test_a_rule_breaking_alias_is_found(source: str, alias: str, rule: str) -> None:
    path = import_aliases.REPOSITORY / "tests" / "example.py"
    (found,) = import_aliases.aliases(path, ast.parse(source))
    assert (found.alias, found.expected) == (alias, rule)


@pytest.mark.parametrize(
    "source",
    [
        "from karpy import clock",
        "from karpy import clock as karpy_clock",
        "from karpy.cloudprovider.fake import provider as fake_provider",
        "import numpy as np",
        "from hypothesis import strategies as st",
        "import pulumi_kubernetes as k8s",
        "from pulumi_karpy.args import KarpenterArgs as KarpenterArgs",
    ],
)
def test_plain_imports_rule_aliases_and_re_exports_pass(source: str) -> None:
    assert list(import_aliases.aliases(pathlib.Path("example.py"), ast.parse(source))) == []


def test_the_rewrite_renames_the_alias_and_its_uses(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "example.py"
    module.write_text(
        "from karpy import clock as clock_mod\n\n\ndef now(c: clock_mod.Clock) -> float:\n    return c.now()\n"
    )
    assert import_aliases.rewrite(module) == (1, [])
    assert module.read_text() == (
        "from karpy import clock as karpy_clock\n\n\ndef now(c: karpy_clock.Clock) -> float:\n    return c.now()\n"
    )
