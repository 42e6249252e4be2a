"""The run of `karpy explain` the README shows is a real one: the command it prints, run on the example dump,
prints exactly the output shown."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from karpy import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def shown_run(command: str, example: str) -> tuple[list[str], str]:
    """The arguments of the README's run of `karpy <command> -f examples/<example>/...` and the output it shows."""
    shown = re.compile(
        rf"```sh\n\.venv/bin/(karpy {command} -f examples/{example}/\S+[^\n]*)\n```\n```text\n(.*?)\n```", re.S
    )
    found = shown.search((ROOT / "README.md").read_text())
    assert found is not None, f"the README's `karpy {command}` example is missing"
    return shlex.split(found.group(1))[1:], found.group(2)


def test_the_readme_shows_a_real_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    args, shown = shown_run("explain", "explain")
    monkeypatch.chdir(ROOT)
    assert cli.main(args) == 0
    assert capsys.readouterr().out.rstrip("\n") == shown
