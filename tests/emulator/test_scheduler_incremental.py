"""The kube-scheduler stand-in over informers: a long-lived stand-in, fed change by change, decides exactly as a
fresh one that lists everything, and a pass after a small change re-derives only the nodes that change touched."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy.scheduling import scheduler as scheduling_scheduler
from karpy_emulator import kube_scheduler, reads, scheduling_queue
from karpy_emulator.apiserver import runner, server

NOW = 1_700_000_000.0
ZONE = "topology.kubernetes.io/zone"
# No backoff: a failed pod that a step's events move is tried in that step's pass, as a fresh stand-in tries every pod.
SETTINGS = kube_scheduler.SchedulerSettings(queue=scheduling_queue.QueueSettings(initial_backoff=0.0, max_backoff=0.0))

node = functools.partial(builders.node, cpu="2", memory="4Gi", ready=True, hostname=True)
pod = functools.partial(builders.pod, cpu="500m")

Step = Callable[[rest.RestClient], Awaitable[None]]


@contextlib.asynccontextmanager
async def _served() -> AsyncIterator[tuple[runner.KubeAPIRunner, rest.RestClient]]:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, clock=lambda: NOW)) as kube:
        async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as api:
            yield kube, api


async def _create(api: rest.RestClient, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        await api.create(resources.NODES if body["kind"] == "Node" else resources.PODS, body)


async def _start(api: rest.RestClient) -> None:
    await _create(
        api,
        node("n1", labels={ZONE: "a"}),
        node("n2", cpu="1", labels={ZONE: "b"}),
        pod("resident", cpu="800m", nodeName="n2"),
        *(pod(f"p{i}") for i in range(5)),
        pod("elsewhere", schedulerName="my-scheduler"),
    )


async def _more_room_and_pods(api: rest.RestClient) -> None:
    await _create(api, node("n3", cpu="4", labels={ZONE: "c"}), pod("big", cpu="3"), *(pod(f"q{i}") for i in range(3)))


async def _cordon_free_and_finish(api: rest.RestClient) -> None:
    await api.patch(resources.NODES, "n1", {"spec": {"unschedulable": True}})
    await api.delete(resources.PODS, "p0", namespace="default")
    await api.patch(
        resources.PODS, "resident", {"status": {"phase": "Succeeded"}}, namespace="default", subresource="status"
    )
    await _create(api, pod("r0"), pod("r1", cpu="1"))


async def _lose_a_node(api: rest.RestClient) -> None:
    await api.delete(resources.NODES, "n3")
    await _create(api, pod("s0", cpu="1"), pod("s1", cpu="3"))


async def _relabel(api: rest.RestClient) -> None:
    await api.patch(resources.NODES, "n2", {"metadata": {"labels": {ZONE: "d"}}})
    await api.patch(resources.NODES, "n1", {"spec": {"unschedulable": False}})
    await _create(api, pod("zonal", nodeSelector={ZONE: "d"}), pod("t0"))


STEPS: tuple[Step, ...] = (_start, _more_room_and_pods, _cordon_free_and_finish, _lose_a_node, _relabel)


async def _state(api: rest.RestClient) -> list[tuple[str, str, str]]:
    """Every pod's node and PodScheduled message, what the stand-in decides."""
    listed, _ = await api.list(resources.PODS)
    out = []
    for p in listed:
        scheduled = [c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"]
        out.append(
            (p["metadata"]["name"], p["spec"].get("nodeName", ""), scheduled[0].get("message", "") if scheduled else "")
        )
    return out


async def test_a_long_lived_stand_in_decides_as_a_fresh_one_at_every_step() -> None:
    async with _served() as (fed_kube, fed_api), _served() as (_, fresh_api):
        fed = kube_scheduler.KubeScheduler(
            fed_api, clock=clock.ManualClock(NOW), settings=SETTINGS, reader=reads.StoreReader(fed_kube)
        )
        decided = 0
        for step in STEPS:
            await step(fed_api)
            await step(fresh_api)
            report = await fed.sync()
            expected = await kube_scheduler.KubeScheduler(
                fresh_api, clock=clock.ManualClock(NOW), settings=SETTINGS
            ).sync()
            # The fresh one tries every pod; the long-lived one only the failed pods the step's events may help
            # (kube-scheduler's queue): the same bindings, and the same verdicts for the pods it tried.
            assert report.bound == expected.bound, step.__name__
            assert report.unschedulable == {k: expected.unschedulable[k] for k in report.unschedulable}, step.__name__
            fed_state, fresh_state = await _state(fed_api), await _state(fresh_api)
            assert [s[:2] for s in fed_state] == [s[:2] for s in fresh_state], step.__name__
            tried = {key.split("/")[1] for key in report.unschedulable}
            assert [s for s in fed_state if s[0] in tried] == [s for s in fresh_state if s[0] in tried], step.__name__
            decided += len(report.bound) + len(report.unschedulable)
        assert decided >= 15  # every step had pods to place or refuse


async def test_a_pass_after_one_change_derives_only_the_node_it_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[str] = []
    real = scheduling_scheduler.derive

    def counted(existing: scheduling_scheduler.ExistingNode) -> scheduling_scheduler.ExistingNode:
        derived.append(existing.name)
        return real(existing)

    monkeypatch.setattr(scheduling_scheduler, "derive", counted)
    async with _served() as (kube, api):
        await _create(api, *(node(f"n{i}", cpu="1") for i in range(10)), *(pod(f"p{i}", cpu="600m") for i in range(10)))
        stand_in = kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW), reader=reads.StoreReader(kube))
        first = await stand_in.sync()
        assert len(first.bound) == 10
        assert sorted(derived) == sorted(f"n{i}" for i in range(10))
        derived.clear()
        await _create(api, pod("small", cpu="300m"))
        second = await stand_in.sync()  # sees the ten bindings and the new pod: every node's pods changed
        assert len(second.bound) == 1
        assert len(derived) == 10
        derived.clear()
        (node_of_small,) = second.bound.values()
        await _create(api, pod("tiny", cpu="100m"))
        third = await stand_in.sync()
        assert len(third.bound) == 1
        assert derived == [node_of_small]  # only the node `small` was bound to changed since


async def test_a_pod_is_parsed_again_only_when_its_spec_or_metadata_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = kube_scheduler._parse

    def counted(raw: Any, templates: Any) -> Any:
        parsed.append(raw["metadata"]["name"])
        return real(raw, templates)

    monkeypatch.setattr(kube_scheduler, "_parse", counted)
    async with _served() as (kube, api):
        await _create(api, node("n1", cpu="4"), pod("a"), pod("b"))
        stand_in = kube_scheduler.KubeScheduler(api, clock=clock.ManualClock(NOW), reader=reads.StoreReader(kube))
        assert len((await stand_in.sync()).bound) == 2
        assert sorted(parsed) == ["a", "b"]
        parsed.clear()
        await _create(api, pod("c"))
        await stand_in.sync()  # the bindings changed a's and b's spec: parsed again, as is the new pod
        assert sorted(parsed) == ["a", "b", "c"]
        parsed.clear()
        running = {"status": {"phase": "Running"}}
        for name in ("a", "b", "c"):
            await api.patch(resources.PODS, name, running, namespace="default", subresource="status")
        await api.patch(resources.PODS, "a", {"metadata": {"labels": {"tier": "web"}}}, namespace="default")
        await stand_in.sync()
        # b's status write reuses its parse; a's label is part of one, and c was bound by the last pass
        assert sorted(parsed) == ["a", "c"]


async def _long_lived(kube: runner.KubeAPIRunner, api: rest.RestClient) -> kube_scheduler.KubeScheduler:
    return kube_scheduler.KubeScheduler(
        api, clock=clock.ManualClock(NOW), settings=SETTINGS, reader=reads.StoreReader(kube)
    )


async def test_a_node_whose_taint_goes_takes_the_pod_it_refused() -> None:
    taint = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
    async with _served() as (kube, api):
        await _create(api, node("n1", taints=[taint]), pod("waiting"))
        stand_in = await _long_lived(kube, api)
        assert "default/waiting" in (await stand_in.sync()).unschedulable  # the node, cached, carries the taint
        await api.patch(resources.NODES, "n1", {"spec": {"taints": []}})
        assert (await stand_in.sync()).bound == {"default/waiting": "n1"}


async def test_a_pod_deleted_from_a_full_node_makes_room_for_a_waiting_one() -> None:
    async with _served() as (kube, api):
        await _create(api, node("n1", cpu="1"), pod("resident", cpu="800m", nodeName="n1"), pod("waiting"))
        stand_in = await _long_lived(kube, api)
        assert "default/waiting" in (await stand_in.sync()).unschedulable  # the node, cached, holds the resident
        await api.delete(resources.PODS, "resident", namespace="default")
        assert (await stand_in.sync()).bound == {"default/waiting": "n1"}


async def test_a_node_relabelled_takes_the_pod_whose_selector_it_now_matches() -> None:
    async with _served() as (kube, api):
        await _create(api, node("n1", labels={ZONE: "a"}), pod("zonal", nodeSelector={ZONE: "b"}))
        stand_in = await _long_lived(kube, api)
        assert "default/zonal" in (await stand_in.sync()).unschedulable
        await api.patch(resources.NODES, "n1", {"metadata": {"labels": {ZONE: "b"}}})
        assert (await stand_in.sync()).bound == {"default/zonal": "n1"}
