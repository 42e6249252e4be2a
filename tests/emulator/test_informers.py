"""informers: a cache kept from the store's changes holds what a LIST answers, its deltas are what changed since the
last refresh (whatever the reader: change history, a compacted history, or a plain client's lists), and a refresh
after the first lists nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import kmock
import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy_emulator import garbage, informers, pdbs, reads, taint_manager, workloads
from karpy_emulator.apiserver import runner, server


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as client:
        yield client


@pytest.fixture
def short_history() -> Iterator[runner.KubeAPIRunner]:
    """An API server that keeps only 3 changes per resource (a watch resuming from further back gets 410)."""
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7, clock=lambda: 1.0, watch_history=3)) as served:
        yield served


def _summary(deltas: list[informers.Delta]) -> list[tuple[str, str | None, str | None]]:
    """(name, old node, new node) per delta; "-" for an absent side, "" for an unbound pod."""

    def node(obj: Any) -> str | None:
        return None if obj is None else str((obj.get("spec") or {}).get("nodeName") or "")

    return sorted((d.key[1], node(d.old), node(d.new)) for d in deltas)


async def _writes(api: rest.RestClient) -> None:
    """After pods a, b, c exist: b bound, c deleted, d created, e created and deleted."""
    await api.bind("default", "b", "n1")
    await api.delete(resources.PODS, "c", namespace="default")
    await api.create(resources.PODS, builders.pod("d", namespace="default", cpu=None))
    await api.create(resources.PODS, builders.pod("e", namespace="default", cpu=None))
    await api.delete(resources.PODS, "e", namespace="default")


TAINT = {"key": "maintenance", "effect": "NoExecute"}
EXPECTED = [("b", "", "n1"), ("c", "", None), ("d", None, "")]


@pytest.mark.parametrize("source", ["feed", "compacted", "client"])
async def test_deltas_are_what_changed_since_the_last_refresh(
    source: str, kube: runner.KubeAPIRunner, short_history: runner.KubeAPIRunner
) -> None:
    served = short_history if source == "compacted" else kube
    async with rest.RestClient(credentials.Credentials(served.url), clock=clock.SystemClock()) as api:
        reader: reads.Reader = api if source == "client" else reads.StoreReader(served)
        for name in ("a", "b", "c"):
            await api.create(resources.PODS, builders.pod(name, namespace="default", cpu=None))
        cache = informers.Cache(resources.PODS)
        (first,) = await informers.refresh(reader, (cache,))
        assert _summary(first) == [("a", None, ""), ("b", None, ""), ("c", None, "")]
        await _writes(api)  # 6 changes: more than the short history keeps
        (second,) = await informers.refresh(reader, (cache,))
        assert _summary(second) == EXPECTED
        listed, _ = await api.list(resources.PODS)
        assert list(cache.sorted()) == listed  # the cache holds what a LIST answers, in its order
        assert await informers.refresh(reader, (cache,)) == [[]]


async def test_the_store_answers_changes_until_they_are_compacted(short_history: runner.KubeAPIRunner) -> None:
    async with rest.RestClient(credentials.Credentials(short_history.url), clock=clock.SystemClock()) as api:
        pods = kmock.resource("v1/pods")
        start = short_history.api.resource_version
        await api.create(resources.PODS, builders.pod("a", namespace="default", cpu=None))
        await api.create(resources.NODES, {"metadata": {"name": "n1"}})  # another resource's history
        await api.bind("default", "a", "n1")
        changes = await short_history.read(lambda: short_history.api.changes_since(pods, start))
        assert changes is not None
        assert [(c.type.value, c.obj["metadata"]["name"]) for c in changes] == [("ADDED", "a"), ("MODIFIED", "a")]
        later = changes[0].resource_version
        rest_of = await short_history.read(lambda: short_history.api.changes_since(pods, later))
        assert [c.resource_version for c in rest_of or ()] == [changes[1].resource_version]
        for name in ("b", "c"):  # the third and fourth change of pods: "a"'s creation is compacted away
            await api.create(resources.PODS, builders.pod(name, namespace="default", cpu=None))
        assert await short_history.read(lambda: short_history.api.changes_since(pods, start)) is None
        assert await short_history.read(lambda: short_history.api.changes_since(pods, later)) is not None


async def test_a_refresh_after_the_first_reads_changes_not_lists(
    api: rest.RestClient, kube: runner.KubeAPIRunner, store_lists: list[str]
) -> None:
    listed = store_lists
    pods, nodes = informers.Cache(resources.PODS), informers.Cache(resources.NODES)
    feed = reads.StoreReader(kube)
    await informers.refresh(feed, (pods, nodes))
    assert listed == ["pods", "nodes"]
    await api.create(resources.PODS, builders.pod("a", namespace="default", cpu=None))
    (added,), none = await informers.refresh(feed, (pods, nodes))
    assert (added.key, added.old, none) == (("default", "a"), None, [])
    assert listed == ["pods", "nodes"]


def test_an_index_follows_each_object_to_its_new_values() -> None:
    index = informers.Index(lambda pod: [str(pod["node"])] if pod.get("node") else [])
    key = ("default", "a")
    assert index.update(informers.Delta(key, None, {"node": "n1"})) == {"n1"}
    assert index.update(informers.Delta(key, {"node": "n1"}, {"node": "n1", "phase": "Running"})) == set()
    assert index.get("n1") == {key}
    assert index.update(informers.Delta(key, {"node": "n1"}, {"node": "n2"})) == {"n1", "n2"}
    assert (index.get("n1"), index.get("n2")) == (frozenset(), {key})
    assert index.update(informers.Delta(key, {"node": "n2"}, None)) == {"n2"}
    assert index.get("n2") == frozenset()


async def test_the_stand_ins_passes_read_changes_not_lists(
    api: rest.RestClient, kube: runner.KubeAPIRunner, store_lists: list[str]
) -> None:
    feed, manual = reads.StoreReader(kube), clock.ManualClock(1_700_000_000.0)
    stand_ins = (
        workloads.WorkloadController(api, clock=manual, reader=feed),
        garbage.GarbageCollector(api, clock=manual, reader=feed),
        pdbs.DisruptionController(api, clock=manual, reader=feed),
        taint_manager.TaintManager(api, clock=manual, reader=feed),
    )
    await api.create(resources.NODES, {"metadata": {"name": "n1"}, "spec": {"taints": [TAINT]}})
    await api.create(resources.PDBS, builders.pdb("web", {"app": "web"}, maxUnavailable=1))
    await api.create(workloads.DEPLOYMENTS, builders.deployment("web", 3, cpu=None))
    for stand_in in stand_ins:
        await stand_in.sync()
    store_lists.clear()  # the first passes list; the later ones must not
    listed = store_lists
    await api.patch(workloads.DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, namespace="default")
    created = await stand_ins[0].sync()
    assert len(created.created) == 2
    for stand_in in stand_ins[1:]:
        await stand_in.sync()
    assert listed == []
    pods, _ = await api.list(resources.PODS, namespace="default")
    assert len(pods) == 5
