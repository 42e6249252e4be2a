"""One pod the scheduling simulation fails on affects only itself: it is set aside, reported and unschedulable
with the error; every other pending pod is provisioned in the same pass."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.provisioning import builders as provisioning_builders
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections
from karpy.clock import ManualClock
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import fake as kube_fake
from karpy.provisioning import isolation, provisioner
from karpy.scheduling import results, scheduler


def _solver_failing_on(label: str) -> Any:
    def solve(inp: scheduler.SchedulingInput) -> results.Results:
        if any(p.labels.get("app") == label for p in inp.pods):
            raise OverflowError("a shape the solver cannot take")
        return scheduler.solve(inp)

    return solve


async def test_the_pods_the_solver_fails_on_are_set_aside_and_the_others_provisioned() -> None:
    good = [builders.pod(f"web-{i}", labels={"app": "web"}, memory="1Gi") for i in range(3)]
    bad = [builders.pod(f"odd-{i}", cpu="2", labels={"app": "odd"}, memory="1Gi") for i in range(2)]
    sink = rejections.MemorySink()
    recorder = events.MemoryRecorder()
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube_fake.FakeKubeClient(ManualClock(0.0)),
            cluster=provisioning_builders.state(
                ManualClock(0.0), pools=[builders.nodepool("default", requirements=[])], pending=[*bad, *good]
            ),
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=ManualClock(0.0),
            recorder=recorder,
            solver=_solver_failing_on("odd"),
            rejections=sink,
        )
    )
    outcome = await prov.provision()
    assert sorted(p for c in outcome.created for p in c.pods) == [f"default/web-{i}" for i in range(3)]
    assert set(outcome.failed) == {"default/odd-0", "default/odd-1"}
    assert all(why.startswith(isolation.FAILED) and "OverflowError" in why for why in outcome.failed.values())
    assert sorted(r.key for r in sink.reports) == ["default/odd-0", "default/odd-1"]
    assert {r.reason for r in sink.reports} == {rejections.Reason.HANDLING_FAILED}
    assert recorder.reasons("odd-0") == ["FailedScheduling"]


def test_a_failure_no_single_group_explains_is_raised() -> None:
    def broken(inp: scheduler.SchedulingInput) -> results.Results:
        if len(inp.pods) > 1:
            raise RuntimeError("fails only on the whole")
        return scheduler.solve(inp)

    pods = [
        builders.parsed_pod("a", labels={"app": "a"}, memory="1Gi"),
        builders.parsed_pod("b", labels={"app": "b"}, memory="1Gi"),
    ]
    inp = scheduler.SchedulingInput(
        pods=pods,
        nodepools=[builders.parsed_nodepool("default", requirements=[])],
        instance_types={"default": fake_catalog(4)},
    )
    with pytest.raises(RuntimeError, match="fails only on the whole"):
        isolation.solve(broken, inp)


def test_a_solve_that_succeeds_is_untouched() -> None:
    pods = [builders.parsed_pod("a", memory="1Gi")]
    inp = scheduler.SchedulingInput(
        pods=pods,
        nodepools=[builders.parsed_nodepool("default", requirements=[])],
        instance_types={"default": fake_catalog(4)},
    )
    outcome = isolation.solve(scheduler.solve, inp)
    assert outcome.set_aside == {}
    assert [p.key for c in outcome.results.new_nodeclaims for p in c.pods] == ["default/a"]
