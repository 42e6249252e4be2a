"""The run of `karpy plan` the README shows is a real one: the command it prints, run on the example dump and
proposal, prints exactly the output shown (and exits 2: the proposal drifts every node)."""

from __future__ import annotations

import pytest
from tests.explain import test_readme as explain_test_readme

from karpy import cli


def test_the_readme_shows_a_real_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    args, shown = explain_test_readme.shown_run("plan", "plan")
    monkeypatch.chdir(explain_test_readme.ROOT)
    assert cli.main(args) == cli.PLAN_DISRUPTION
    assert capsys.readouterr().out.rstrip("\n") == shown
