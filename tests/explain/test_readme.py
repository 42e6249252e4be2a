"""The run of `karpy explain` the README shows is a real one: the command it prints, run on the example dump,
prints exactly the output shown."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from karpy import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOWN = re.compile(r"```sh\n\.venv/bin/(karpy explain -f examples/explain/\S+[^\n]*)\n```\n```text\n(.*?)\n```", re.S)


def test_the_readme_shows_a_real_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    found = SHOWN.search((ROOT / "README.md").read_text())
    assert found is not None, "the README's `karpy explain` example is missing"
    command, shown = found.group(1), found.group(2)
    monkeypatch.chdir(ROOT)
    assert cli.main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out.rstrip("\n") == shown
