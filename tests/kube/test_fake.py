"""`karpy.kube.fake.FakeKubeClient` answers as the API server does where reconcilers depend on it."""

from __future__ import annotations

import asyncio

import pytest
from tests import builders

from karpy import clock
from karpy.kube import client, fake, resources
from karpy.state import cluster, informer

R = resources
T0 = 1_700_000_000.0


@pytest.fixture
def manual() -> clock.ManualClock:
    return clock.ManualClock(T0)


@pytest.fixture
def kube(manual: clock.ManualClock) -> fake.FakeKubeClient:
    return fake.FakeKubeClient(manual)


async def test_create_names_stamps_and_refuses_a_taken_name(kube: fake.FakeKubeClient) -> None:
    created = await kube.create(R.NODECLAIMS, {**builders.nodeclaim(""), "metadata": {"generateName": "web-"}})
    assert created["metadata"]["name"] == "web-00001"
    assert created["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert created["metadata"]["uid"] == "uid-web-00001"
    with pytest.raises(client.AlreadyExists):
        await kube.create(R.NODECLAIMS, builders.nodeclaim("web-00001"))
    kube.next_create_error = client.KubeError(500, "InternalError", "etcd")
    with pytest.raises(client.KubeError, match="etcd"):
        await kube.create(R.NODECLAIMS, builders.nodeclaim("refused"))
    await kube.create(R.NODECLAIMS, builders.nodeclaim("accepted"))  # the error was raised once
    assert [o["metadata"]["name"] for o in kube.all(R.NODECLAIMS)] == ["accepted", "web-00001"]


async def test_a_stale_resource_version_conflicts(kube: fake.FakeKubeClient) -> None:
    stored = kube.put(R.NODES, builders.node("n1"))
    version = stored["metadata"]["resourceVersion"]
    await kube.patch(R.NODES, "n1", {"metadata": {"labels": {"a": "1"}, "resourceVersion": version}})
    with pytest.raises(client.Conflict):
        await kube.patch(R.NODES, "n1", {"metadata": {"labels": {"a": "2"}, "resourceVersion": version}})
    assert (await kube.get(R.NODES, "n1") or {})["metadata"]["labels"] == {"a": "1"}


async def test_status_moves_only_through_its_subresource(kube: fake.FakeKubeClient) -> None:
    kube.put(R.NODECLAIMS, builders.nodeclaim("c", providerID="aws:///z/i-1"))
    await kube.patch(R.NODECLAIMS, "c", {"metadata": {"labels": {"x": "y"}}, "status": {"providerID": "lost"}})
    status_patch = {"metadata": {"labels": {"x": "lost"}}, "status": {"imageID": "ami-1"}}
    await kube.patch(R.NODECLAIMS, "c", status_patch, subresource="status")
    got = await kube.get(R.NODECLAIMS, "c") or {}
    assert got["metadata"]["labels"]["x"] == "y"
    assert got["status"] == {"providerID": "aws:///z/i-1", "imageID": "ami-1"}


async def test_finalizers_hold_a_deleted_object_until_removed(kube: fake.FakeKubeClient) -> None:
    kube.put(R.NODES, {**builders.node("n1"), "metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}})
    assert await kube.delete(R.NODES, "n1")
    held = await kube.get(R.NODES, "n1") or {}
    assert held["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"
    await kube.patch(R.NODES, "n1", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert await kube.get(R.NODES, "n1") is None
    assert not await kube.delete(R.NODES, "n1")


async def test_selectors_filter_lists(kube: fake.FakeKubeClient) -> None:
    kube.put(R.PODS, builders.pod("a", labels={"app": "web"}, node="n1"))
    kube.put(R.PODS, builders.pod("b", labels={"app": "web"}, node="n2"))
    kube.put(R.PODS, builders.pod("c", labels={"app": "db"}, node="n1"))
    found, _ = await kube.list(R.PODS, label_selector="app=web", field_selector="spec.nodeName==n1")
    assert [p["metadata"]["name"] for p in found] == ["a"]


async def test_evictions_honour_one_budget_and_refuse_two(kube: fake.FakeKubeClient) -> None:
    for name in ("a", "b"):
        kube.put(R.PODS, builders.ready(builders.pod(name, labels={"app": "web"})))
    kube.put(R.PDBS, builders.pdb("web", {"app": "web"}, minAvailable=1))
    assert await kube.evict(builders.NS, "a") is client.EvictionOutcome.EVICTED
    assert await kube.evict(builders.NS, "b") is client.EvictionOutcome.BLOCKED
    assert await kube.evict(builders.NS, "a") is client.EvictionOutcome.NOT_FOUND
    kube.put(R.PDBS, builders.pdb("web-too", {"app": "web"}, maxUnavailable=1))
    assert await kube.evict(builders.NS, "b") is client.EvictionOutcome.FAILED
    assert [(name, outcome.value) for _, name, outcome in kube.evictions] == [
        ("a", "Evicted"),
        ("b", "Blocked"),
        ("a", "NotFound"),
        ("b", "Failed"),
    ]


async def test_bind_sets_the_node_once(kube: fake.FakeKubeClient) -> None:
    kube.put(R.PODS, builders.pod("p"))
    await kube.bind(builders.NS, "p", "n1")
    assert (await kube.get(R.PODS, "p", namespace=builders.NS) or {})["spec"]["nodeName"] == "n1"
    with pytest.raises(client.Conflict):
        await kube.bind(builders.NS, "p", "n2")
    with pytest.raises(client.NotFound):
        await kube.bind(builders.NS, "gone", "n1")


async def test_a_crash_hook_stops_the_write_it_matches(kube: fake.FakeKubeClient) -> None:
    kube.put(R.NODES, builders.node("n1"))
    kube.crash_on = lambda write: write.verb == "delete"
    with pytest.raises(fake.Crash):
        await kube.delete(R.NODES, "n1")
    assert kube.obj(R.NODES, "n1") is not None
    assert await kube.delete(R.NODES, "n1")  # the hook fired once
    assert [(w.verb, w.name) for w in kube.writes] == [("delete", "n1"), ("delete", "n1")]


async def test_an_informer_on_the_fake_sees_every_change(kube: fake.FakeKubeClient, manual: clock.ManualClock) -> None:
    kube.put(R.NODES, builders.node("n1", provider_id="aws:///z/i-1"))
    state = cluster.Cluster(clock=manual)
    task = asyncio.create_task(informer.run_informers(kube, state, (R.NODES, R.PODS)))
    try:
        await manual.settle()
        assert state.synced()
        await kube.create(R.PODS, builders.pod("p", node="n1"))
        await manual.settle()
        assert [p.name for p in state.pods_on("n1")] == ["p"]
        await kube.delete(R.PODS, "p", namespace=builders.NS)
        await manual.settle()
        assert state.pods_on("n1") == []
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_follower_sees_the_store_then_every_change_of_what_it_follows(kube: fake.FakeKubeClient) -> None:
    kube.put(R.NODES, builders.node("n1"))
    seen: list[tuple[str, str, str]] = []
    kube.follow(lambda res, event: seen.append((res.plural, event.type, event.object["metadata"]["name"])), R.NODES)
    kube.put(R.PODS, builders.pod("p", node="n1"))  # not followed
    await kube.create(R.NODES, builders.node("n2"))
    await kube.patch(R.NODES, "n2", {"metadata": {"labels": {"team": "a"}}})
    await kube.delete(R.NODES, "n1")
    assert seen == [
        ("nodes", "ADDED", "n1"),
        ("nodes", "ADDED", "n2"),
        ("nodes", "MODIFIED", "n2"),
        ("nodes", "DELETED", "n1"),
    ]


async def test_a_watch_from_a_compacted_version_expires(kube: fake.FakeKubeClient) -> None:
    kube.put(R.NODES, builders.node("n1"))
    _, version = await kube.list(R.NODES)
    kube.put(R.NODES, builders.node("n2"))
    replayed = kube.watch(R.NODES, resource_version=version, timeout_seconds=0)
    assert [(e.type, e.object["metadata"]["name"]) async for e in replayed] == [("ADDED", "n2")]
    kube.compact()
    with pytest.raises(client.Expired):
        async for _ in kube.watch(R.NODES, resource_version=version, timeout_seconds=0):
            pass
