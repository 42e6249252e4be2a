"""`karpy teardown`'s exit codes and messages (the work itself: tests/e2e/test_teardown.py)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import cli
from karpy.kube import client, credentials
from karpy.operator import login
from karpy.operator import teardown as operator_teardown
from karpy.termination import teardown

LEFT = [
    teardown.Leftover("default-abcde", "ip-10-0-1-2.ec2.internal", "aws:///us-west-2a/i-0123456789abcdef0"),
    teardown.Leftover("default-fghij", "", ""),
]


@pytest.fixture
def logged_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))


def outcome(monkeypatch: pytest.MonkeyPatch, error: BaseException | None) -> None:
    async def run(*_: Any, **__: Any) -> teardown.Deleted:
        if error is not None:
            raise error
        return teardown.Deleted(nodepools=("default",), nodeclaims=())

    monkeypatch.setattr(operator_teardown, "run", run)


@pytest.mark.usefixtures("logged_in")
def test_nodeclaims_left_exit_1_naming_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome(monkeypatch, teardown.TimedOut(240, LEFT))
    assert cli.main(["teardown", "--timeout", "4m"]) == operator_teardown.EXIT_LEFT == 1
    err = capsys.readouterr().err
    assert err.startswith("karpy teardown: 2 NodeClaim(s) still there after 240 s: ")
    assert "default-abcde (node ip-10-0-1-2.ec2.internal, aws:///us-west-2a/i-0123456789abcdef0)" in err
    assert "default-fghij;" in err


@pytest.mark.usefixtures("logged_in")
def test_a_refused_request_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    outcome(monkeypatch, client.KubeError(403, "Forbidden", "nodepools is forbidden"))
    assert cli.main(["teardown"]) == 1
    assert "karpy teardown: the API server refused a request: " in capsys.readouterr().err


@pytest.mark.usefixtures("logged_in")
def test_nothing_left_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome(monkeypatch, None)
    assert cli.main(["teardown", "--timeout", "30s"]) == 0


def test_no_credentials_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(_: object) -> credentials.Credentials:
        raise login.LoginError("/nowhere/kubeconfig: cannot use the kubeconfig")

    monkeypatch.setattr(login, "login", refuse)
    assert cli.main(["teardown"]) == 2
    assert "karpy teardown: cannot log in to the Kubernetes API: /nowhere" in capsys.readouterr().err
