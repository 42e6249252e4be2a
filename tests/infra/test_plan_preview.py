"""`pulumi preview` of a stack with the default NodePool shows `karpy plan`'s summary of it against the cluster of
$KUBECONFIG (here the emulated API server, seeded with explain's synthetic cluster), runs the real `karpy plan` in
a child process, never fails for lack of access, and can be turned off."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import pathlib
import subprocess
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
from tests.plan import test_cli as plan_test_cli

from karpy_emulator import dumps
from karpy_emulator.apiserver import runner, server
from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import component, preview

from .mocks import REGION, Run

SHAPE = dumps.Shape(nodes=4, pods_per_node=3, budget="1", now=1.8e9)


def stack(run: Run, *, plan_preview: bool) -> None:
    def program() -> Mapping[str, Any]:
        providers = [aws.Provider("aws", region=REGION), k8s.Provider("k8s", kubeconfig="{}")]
        pool = pulumi_karpy_args.DefaultNodePoolArgs(plan_preview=plan_preview)
        args = pulumi_karpy_args.KarpenterArgs(cluster_name="demo", default_node_pool=pool)
        component.Karpenter("karpy", args, opts=pulumi.ResourceOptions(providers=providers))
        return {}

    run(program, preview=True)


def test_preview_shows_the_plan_of_the_default_pool(
    pulumi_run: Run, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # Pulumi's mock engine logs the diagnostics to the root logger
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        # Seeded on a thread of its own: asyncio.run here would unset the loop the Pulumi mocks run on.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, plan_test_cli.seed(kube.url, SHAPE)).result()
        monkeypatch.setenv("KUBECONFIG", str(kube.write_kubeconfig(tmp_path / "kubeconfig")))
        stack(pulumi_run, plan_preview=True)
    shown = [r.getMessage() for r in caplog.records if r.getMessage().startswith("karpy plan: ")]
    # The stack's node class selects subnets by another tag (the cluster name) and launches with the stack's role:
    # tags cannot be resolved offline (may drift); the NodeClaims carry no node class hash: the role drifts nothing.
    assert shown[0] == "karpy plan: default: 0 of 4 nodes drift, 4 may drift"
    assert shown[1].startswith("karpy plan: $/h 1.54 → ")


def test_turned_off_it_reads_nothing(
    pulumi_run: Run, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        monkeypatch.setenv("KUBECONFIG", str(kube.write_kubeconfig(tmp_path / "kubeconfig")))
        stack(pulumi_run, plan_preview=False)
        assert not [a for a in kube.api.accesses.snapshot() if a.user == "fake-token"]
    assert not [r for r in caplog.records if "karpy plan" in r.getMessage()]


def test_an_unreachable_cluster_is_a_note_not_a_failure(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with runner.KubeAPIRunner() as kube:
        kube.write_kubeconfig(kubeconfig)
    (line,) = preview.plan([dumps.nodepool(SHAPE)], kubeconfig=str(kubeconfig))
    assert line.startswith("karpy plan skipped: ")
    assert "cannot list the cluster's objects" in line


def test_no_kubeconfig_starts_nothing(tmp_path: pathlib.Path) -> None:
    def refuse(*_: Any, **__: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError("karpy plan started without a kubeconfig")

    missing = str(tmp_path / "none")
    assert preview.plan([], kubeconfig=missing, runner=refuse) == [f"karpy plan skipped: no kubeconfig at {missing}"]


def test_a_slow_cluster_costs_at_most_the_timeout(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")

    def slow(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])  # as subprocess.run reports its deadline

    assert preview.plan([], kubeconfig=str(kubeconfig), timeout=3.0, runner=slow) == [
        "karpy plan skipped: no answer within 3 s"
    ]
