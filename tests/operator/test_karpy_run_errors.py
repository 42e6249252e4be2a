"""`karpy run` started by a user with something wrong that the user can fix: no traceback, one line on standard
error naming the cause, and the exit code README documents (operator/main.py: 2 settings, kubeconfig, refused
credentials or permissions; 3 the API server cannot be reached). Run as a user runs it: its own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import kmock
import pytest

from karpy.operator import main
from karpy.runtime import leadership
from karpy_emulator.apiserver import runner, server

ENV = {"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"}


def karpy_run(env: dict[str, str], home: Path) -> tuple[int, list[str]]:
    """Exit code and the lines of standard error that are not the JSON log (start-up info lines)."""
    base = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONWARNINGS": "error",
        # the process fails before it serves: ports nothing else on the machine uses, all the same
        "METRICS_PORT": str(closed_port()), "HEALTH_PROBE_PORT": str(closed_port()),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "karpy.cli", "run"], env={**base, **env}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert '"level":"warning"' not in done.stderr, "no informer started to warn about the server"
    return done.returncode, [line for line in done.stderr.splitlines() if not line.startswith("{")]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on leaving: nothing listens there


def test_an_unreachable_api_server_exits_3(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    url = f"http://127.0.0.1:{closed_port()}"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    code, lines = karpy_run({**ENV, "KUBECONFIG": str(kubeconfig)}, tmp_path)
    assert code == 3
    (line,) = lines
    assert line.startswith(f"karpy run: cannot reach the Kubernetes API server at {url}: ")
    assert "Connect call failed" in line
    assert "SSLContext object" not in line
    assert line.endswith("(exit 3)")


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (401, "refused the credentials (401 Unauthorized): check the kubeconfig's user or the pod's token"),
        (
            403,
            "forbids reading Lease default/karpy-leader-election (403 Forbidden): check the controller's RBAC "
            "(the karpy chart's Role)",
        ),
    ],
)
def test_refused_credentials_exit_2(tmp_path: Path, status: int, says: str) -> None:
    with runner.KubeAPIRunner(server.FakeKubeAPI()) as kube:
        kube.api[kmock.headers(Authorization="Bearer fake-token")] << status
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        code, lines = karpy_run({**ENV, "KUBECONFIG": str(kubeconfig)}, tmp_path)
    assert code == 2
    assert lines == [f"karpy run: the Kubernetes API server at {kube.url} {says} (exit 2)"]


def test_a_missing_setting_exits_2(tmp_path: Path) -> None:
    code, lines = karpy_run({"KUBECONFIG": str(tmp_path / "none")}, tmp_path)
    assert code == 2
    assert lines == ["karpy run: invalid settings: 1 problem(s)", "  - CLUSTER_NAME: is required"]


def test_a_missing_kubeconfig_exits_2(tmp_path: Path) -> None:
    code, lines = karpy_run({**ENV, "KUBECONFIG": str(tmp_path / "none")}, tmp_path)
    assert code == 2
    (line,) = lines
    assert line.startswith(f"karpy run: cannot log in to the Kubernetes API: {tmp_path / 'none'}: ")


def test_a_task_that_fails_later_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    lost = leadership.TaskFailed("leader election", ConnectionRefusedError(111, "Connect call failed"))
    assert main._task_failed(lost, server="https://k8s.example") == main.EXIT_UNREACHABLE
    assert capsys.readouterr().err == (
        "karpy run: leader election failed: lost the Kubernetes API server at https://k8s.example: [Errno 111] Connect "
        "call failed (exit 3)\n"
    )
    bug = leadership.TaskFailed("informers", KeyError("spec"))
    assert main._task_failed(bug, server="https://k8s.example") == main.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("karpy run: informers failed: KeyError: 'spec' (a karpy bug, please report it;")
    assert err.count("\n") == 1
