"""reads.StoreReader: the stand-ins' shared view of the store answers exactly what the API server's LIST answers
(objects, order, namespace, label and field selectors), sees every write answered before it, and sends no request;
an informers.Cache over it keeps a resource's objects current from the store's changes alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy_emulator import informers, reads
from karpy_emulator.apiserver import runner, server


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        yield client


QUERIES = [
    (resources.PODS, {}),
    (resources.PODS, {"namespace": "b"}),
    (resources.PODS, {"label_selector": "app=web"}),
    (resources.PODS, {"label_selector": "app in (web,db)", "namespace": "a"}),
    (resources.PODS, {"field_selector": "spec.nodeName!="}),
    (resources.PODS, {"field_selector": "spec.nodeName="}),
    (resources.NODES, {}),
    (resources.NODES, {"label_selector": "zone=z1"}),
]


@pytest.mark.parametrize(("res", "query"), QUERIES, ids=[f"{r.plural}-{q}" for r, q in QUERIES])
async def test_the_store_view_answers_as_the_list(
    api: rest.RestClient, kube: runner.KubeAPIRunner, res: resources.Resource, query: dict[str, str]
) -> None:
    for name, namespace, app, node in (
        ("z", "b", "web", "n1"),
        ("a", "b", "db", ""),
        ("m", "a", "web", ""),
        ("c", "a", "db", "n2"),
        ("q", "a", "batch", "n1"),
    ):
        await api.create(
            resources.PODS, builders.pod(name, namespace=namespace, labels={"app": app}, node=node, cpu=None)
        )
    for name, zone in (("n2", "z2"), ("n1", "z1")):
        await api.create(resources.NODES, {"metadata": {"name": name, "labels": {"zone": zone}}})
    await api.delete(resources.PODS, "q", namespace="a")
    reader = reads.StoreReader(kube)

    listed, _ = await api.list(res, **query)
    viewed, version = await reader.list(res, **query)
    assert viewed == listed
    assert [o["metadata"]["name"] for o in viewed] == [o["metadata"]["name"] for o in listed]
    assert listed  # every query matches something: the comparison is not between two empty lists
    assert int(version) == kube.api.resource_version


async def test_the_view_sees_writes_at_once_and_sends_no_request(
    api: rest.RestClient, kube: runner.KubeAPIRunner
) -> None:
    reader = reads.StoreReader(kube)
    await api.create(resources.PODS, builders.pod("web", namespace="default", labels={"app": "web"}, cpu=None))
    kube.api.accesses.clear()
    await api.bind("default", "web", "n1")
    (pod,), _ = await reader.list(resources.PODS, field_selector="spec.nodeName=n1")
    assert pod["spec"]["nodeName"] == "n1"
    assert {a.verb for a in kube.api.accesses.snapshot()} == {"create"}  # the binding only, no list


async def test_the_change_feed_moves_only_with_writes_to_the_resources_asked(
    api: rest.RestClient, kube: runner.KubeAPIRunner
) -> None:
    reader = reads.StoreReader(kube)
    quiet = await reader.changed_at([resources.PODS, resources.NODES])
    await api.create(resources.NODES, {"metadata": {"name": "n1"}})
    after_node = await reader.changed_at([resources.PODS, resources.NODES])
    assert after_node > quiet
    assert await reader.changed_at([resources.PODS]) == quiet  # a node is no pod's change
    await api.list(resources.NODES)  # reads change nothing
    assert await reader.changed_at([resources.PODS, resources.NODES]) == after_node
    await api.create(resources.PODS, builders.pod("web", namespace="default", cpu=None))
    await api.bind("default", "web", "n1")
    bound = await reader.changed_at([resources.PODS])
    assert bound == kube.api.resource_version  # the binding's write, the latest
    await api.delete(resources.PODS, "web", namespace="default")
    assert await reader.changed_at([resources.PODS]) > bound
    assert await reader.changed_at([resources.NODES]) == after_node


async def _listed(api: rest.RestClient, res: resources.Resource) -> dict[informers.Key, Any]:
    items, _ = await api.list(res)
    return {informers.key_of(obj): obj for obj in items}


async def _sync(reader: reads.Reader, cache: informers.Cache) -> set[informers.Key]:
    """Refresh `cache` alone; the keys of the objects that changed."""
    [deltas] = await informers.refresh(reader, [cache])
    return {delta.key for delta in deltas}


async def test_a_cache_takes_only_the_changes_and_stays_equal_to_a_list(
    api: rest.RestClient, kube: runner.KubeAPIRunner, store_lists: list[str]
) -> None:
    for name in ("a", "b", "c"):
        await api.create(resources.PODS, builders.pod(name, namespace="default", cpu=None))
    lists = store_lists
    feed, informer = reads.StoreReader(kube), informers.Cache(resources.PODS)
    assert await _sync(feed, informer) == {("default", "a"), ("default", "b"), ("default", "c")}
    assert informer.objects == await _listed(api, resources.PODS)
    assert lists == ["pods"]  # the first sync lists ...

    await api.bind("default", "a", "n1")
    await api.patch(resources.PODS, "b", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    await api.delete(resources.PODS, "c", namespace="default")
    await api.create(resources.PODS, builders.pod("c", namespace="default", cpu=None))  # the same key again
    await api.create(resources.PODS, builders.pod("d", namespace="other", cpu=None))
    await api.create(resources.NODES, {"metadata": {"name": "n1"}})  # another resource: no change of its
    assert await _sync(feed, informer) == {("default", "a"), ("default", "b"), ("default", "c"), ("other", "d")}
    assert informer.objects == await _listed(api, resources.PODS)
    await api.delete(resources.PODS, "b", namespace="default")
    assert await _sync(feed, informer) == {("default", "b")}
    assert await _sync(feed, informer) == set()  # nothing since
    assert informer.objects == await _listed(api, resources.PODS)
    assert lists == ["pods"]  # ... and the later ones take the changes only


async def test_a_cache_lists_again_once_its_changes_are_no_longer_kept(store_lists: list[str]) -> None:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, watch_history=3)) as kube:
        async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as api:
            await api.create(resources.PODS, builders.pod("a", namespace="default", cpu=None))
            lists = store_lists
            feed, informer = reads.StoreReader(kube), informers.Cache(resources.PODS)
            await _sync(feed, informer)
            for i in range(4):  # one more change than the store keeps
                await api.patch(resources.PODS, "a", {"metadata": {"labels": {"i": str(i)}}}, namespace="default")
            await api.create(resources.PODS, builders.pod("b", namespace="default", cpu=None))
            assert await _sync(feed, informer) == {("default", "a"), ("default", "b")}
            assert informer.objects == await _listed(api, resources.PODS)
            assert lists == ["pods", "pods"]


async def test_a_cache_over_a_plain_client_lists_and_compares(api: rest.RestClient) -> None:
    feed, informer = api, informers.Cache(resources.PODS)
    await api.create(resources.PODS, builders.pod("a", namespace="default", cpu=None))
    await api.create(resources.PODS, builders.pod("b", namespace="default", cpu=None))
    assert await _sync(feed, informer) == {("default", "a"), ("default", "b")}
    await api.bind("default", "a", "n1")
    await api.delete(resources.PODS, "b", namespace="default")
    assert await _sync(feed, informer) == {("default", "a"), ("default", "b")}
    assert await _sync(feed, informer) == set()
    assert informer.objects == await _listed(api, resources.PODS)
