"""`RestClient` against the emulated API server: CRUD, patches, subresources, selectors, watches, errors, and one
re-login after a 401."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

import kmock
import pytest
from tests import builders

from karpy import clock
from karpy.kube import client, credentials, resources, rest
from karpy_emulator.apiserver import runner, server

NS = builders.NS


async def test_create_get_list_delete_round_trip(api: rest.RestClient) -> None:
    created = await api.create(resources.PODS, builders.pod("p1"))
    assert created["metadata"]["uid"]
    fetched = await api.get(resources.PODS, "p1", namespace=NS)
    assert fetched is not None
    assert fetched["metadata"]["uid"] == created["metadata"]["uid"]
    items, version = await api.list(resources.PODS, namespace=NS)
    assert [i["metadata"]["name"] for i in items] == ["p1"]
    assert int(version) >= int(created["metadata"]["resourceVersion"])
    assert await api.delete(resources.PODS, "p1", namespace=NS, grace_period_seconds=0) is True
    assert await api.get(resources.PODS, "p1", namespace=NS) is None


async def test_delete_of_a_missing_object_is_false_and_get_is_none(api: rest.RestClient) -> None:
    assert await api.delete(resources.NODES, "nope") is False
    assert await api.get(resources.NODES, "nope") is None


async def test_list_follows_continue_tokens(kube: runner.KubeAPIRunner) -> None:
    cfg = credentials.Credentials(kube.url)
    async with rest.RestClient(cfg, clock=clock.SystemClock(), page_size=2) as small_pages:
        for i in range(5):
            await small_pages.create(resources.NODES, builders.node(f"n{i}"))
        items, version = await small_pages.list(resources.NODES)
    assert sorted(i["metadata"]["name"] for i in items) == [f"n{i}" for i in range(5)]
    assert version


async def test_label_and_field_selectors_filter_the_list(api: rest.RestClient) -> None:
    await api.create(resources.PODS, builders.pod("a", labels={"app": "web"}, node="n1"))
    await api.create(resources.PODS, builders.pod("b", labels={"app": "db"}, node="n2"))
    await api.create(resources.PODS, builders.pod("c", namespace="other", labels={"app": "web"}, node="n1"))
    web, _ = await api.list(resources.PODS, label_selector="app=web")
    assert sorted(p["metadata"]["name"] for p in web) == ["a", "c"]
    on_n1, _ = await api.list(resources.PODS, namespace=NS, field_selector="spec.nodeName=n1")
    assert [p["metadata"]["name"] for p in on_n1] == ["a"]


async def test_merge_patch_removes_keys_with_null_and_json_patch_edits_lists(api: rest.RestClient) -> None:
    body = builders.node("n1", labels={"keep": "1", "drop": "2"})
    body["spec"]["taints"] = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    await api.create(resources.NODES, body)
    merged = await api.patch(resources.NODES, "n1", {"metadata": {"labels": {"drop": None, "new": "3"}}})
    assert merged["metadata"]["labels"] == {"keep": "1", "new": "3"}
    patched = await api.patch(resources.NODES, "n1", [{"op": "remove", "path": "/spec/taints/0"}])
    assert [t["key"] for t in patched["spec"]["taints"]] == ["b"]  # a merge patch would replace the whole list


async def test_status_subresource_writes_only_status(api: rest.RestClient) -> None:
    await api.create(resources.NODEPOOLS, builders.nodepool("np"))
    result = await api.patch(
        resources.NODEPOOLS, "np", {"status": {"nodes": 3}, "spec": {"weight": 5}}, subresource="status"
    )
    assert result["status"]["nodes"] == 3
    assert "weight" not in result["spec"]  # spec changes through /status are ignored, as the API server does


async def test_conflict_already_exists_and_invalid_are_typed(api: rest.RestClient) -> None:
    await api.create(resources.NODES, builders.node("n1"))
    with pytest.raises(client.AlreadyExists) as exists:
        await api.create(resources.NODES, builders.node("n1"))
    assert exists.value.status == 409
    with pytest.raises(client.Conflict) as conflict:
        await api.patch(resources.NODES, "n1", {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})
    assert conflict.value.reason == "Conflict"
    assert not isinstance(conflict.value, client.AlreadyExists)
    bad = builders.nodepool("bad", weight=1000)
    with pytest.raises(client.Invalid) as invalid:
        await api.create(resources.NODEPOOLS, bad)
    assert invalid.value.status == 422
    assert any(field == "spec.weight" for field, _ in invalid.value.causes)


async def test_patch_of_a_missing_object_raises_not_found(api: rest.RestClient) -> None:
    with pytest.raises(client.NotFound):
        await api.patch(resources.NODES, "ghost", {"metadata": {"labels": {"a": "b"}}})


async def test_evictions_map_budget_refusals_and_missing_pods(api: rest.RestClient) -> None:
    for i in range(2):
        await api.create(resources.PODS, builders.pod(f"web-{i}", labels={"app": "web"}))
        status = {"status": builders.ready({})["status"]}
        await api.patch(resources.PODS, f"web-{i}", status, namespace=NS, subresource="status")
    await api.create(resources.PDBS, builders.pdb("web", {"app": "web"}, minAvailable=1))
    assert await api.evict(NS, "web-0") is client.EvictionOutcome.EVICTED
    assert await api.evict(NS, "web-1") is client.EvictionOutcome.BLOCKED  # 1 healthy, 1 required
    assert await api.evict(NS, "ghost") is client.EvictionOutcome.NOT_FOUND
    await api.create(resources.PDBS, builders.pdb("web-too", {"app": "web"}, maxUnavailable=5))
    assert await api.evict(NS, "web-1") is client.EvictionOutcome.FAILED  # two budgets select it: 500


async def test_bind_assigns_the_node_and_rebinding_conflicts(api: rest.RestClient) -> None:
    await api.create(resources.PODS, builders.pod("p"))
    await api.bind(NS, "p", "n1")
    bound = await api.get(resources.PODS, "p", namespace=NS)
    assert bound is not None
    assert bound["spec"]["nodeName"] == "n1"
    with pytest.raises(client.Conflict):
        await api.bind(NS, "p", "n2")


async def _collect(stream: AsyncIterator[client.WatchEvent], count: int) -> list[client.WatchEvent]:
    events: list[client.WatchEvent] = []
    try:
        async for event in stream:
            events.append(event)
            if len(events) == count:
                break
    finally:
        await client.aclose(stream)
    return events


async def test_watch_replays_changes_after_the_version_in_order(api: rest.RestClient) -> None:
    _, start = await api.list(resources.PODS, namespace=NS)
    await api.create(resources.PODS, builders.pod("p1"))
    await api.patch(resources.PODS, "p1", {"metadata": {"labels": {"a": "b"}}}, namespace=NS)
    await api.delete(resources.PODS, "p1", namespace=NS, grace_period_seconds=0)
    stream = api.watch(resources.PODS, resource_version=start, namespace=NS, timeout_seconds=5)
    events = await _collect(stream, 3)  # the watch's own timeoutSeconds ends it
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "p1"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]
    # Resuming from the middle replays only what came after it.
    middle = str(events[0].object["metadata"]["resourceVersion"])
    rest_of = await _collect(api.watch(resources.PODS, resource_version=middle, namespace=NS, timeout_seconds=5), 2)
    assert [e.type for e in rest_of] == ["MODIFIED", "DELETED"]


async def test_watch_ends_when_the_server_timeout_elapses(api: rest.RestClient) -> None:
    _, start = await api.list(resources.NODES)
    events = [e async for e in api.watch(resources.NODES, resource_version=start, timeout_seconds=1)]
    assert events == []


async def test_live_watch_sees_writes_and_cancels_cleanly(api: rest.RestClient) -> None:
    _, start = await api.list(resources.NODES)
    seen: list[str] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in api.watch(resources.NODES, resource_version=start, timeout_seconds=30):
            seen.append(f"{event.type}:{event.object['metadata']['name']}")
            first.set()

    task = asyncio.create_task(consume())
    await api.create(resources.NODES, builders.node("n1"))
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["ADDED:n1"]
    assert await api.get(resources.NODES, "n1") is not None  # the session still works after the cancellation


async def test_watch_from_a_compacted_version_raises_expired() -> None:
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(watch_history=2)) as kube,
        rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as api,
    ):
        _, start = await api.list(resources.NODES)
        for i in range(4):
            await api.create(resources.NODES, builders.node(f"n{i}"))
        with pytest.raises(client.Expired) as expired:
            async for _ in api.watch(resources.NODES, resource_version=start, timeout_seconds=5):
                pass
    assert expired.value.status == 410


async def test_a_401_logs_in_again_once_and_the_request_succeeds(kube: runner.KubeAPIRunner) -> None:
    # An expired token (a projected service-account token, an exec plugin's): the server refuses it from now on.
    async def refuse_the_stale_token() -> None:
        kube.api[kmock.headers(Authorization="Bearer stale")] << 401

    await asyncio.to_thread(kube.call, refuse_the_stale_token)
    logins: list[str] = []

    async def relogin() -> credentials.Credentials:
        logins.append("fresh")
        return credentials.bearer(kube.url, "fresh")

    stale = credentials.bearer(kube.url, "stale")
    async with rest.RestClient(stale, clock=clock.SystemClock(), relogin=relogin) as api:
        # Two requests refused at once: one login serves both, and each is sent again once.
        await asyncio.gather(api.create(resources.NODES, builders.node("n1")), api.list(resources.NODES))
        assert logins == ["fresh"]
        assert api.credentials.authorization == "Bearer fresh"
    async with rest.RestClient(stale, clock=clock.SystemClock(), relogin=relogin) as api:
        async with contextlib.aclosing(api.watch(resources.NODES, resource_version="", timeout_seconds=5)) as stream:
            first = await anext(stream)  # a refused watch is opened again with the new credentials
        assert first.object["metadata"]["name"] == "n1"
    assert logins == ["fresh", "fresh"]
    sent = collections.Counter(r.headers.get("Authorization") for r in list(kube.api))
    assert sent == {"Bearer stale": 3, "Bearer fresh": 3}


async def test_a_401_without_a_way_to_log_in_again_or_after_it_is_an_error(kube: runner.KubeAPIRunner) -> None:
    async def refuse_everyone() -> None:
        kube.api[kmock.method.GET] << 401

    await asyncio.to_thread(kube.call, refuse_everyone)
    logins: list[str] = []

    async def relogin() -> credentials.Credentials:
        logins.append("again")
        return credentials.bearer(kube.url, f"token-{len(logins)}")

    async with rest.RestClient(credentials.bearer(kube.url, "t"), clock=clock.SystemClock()) as api:
        with pytest.raises(client.KubeError) as refused:
            await api.list(resources.NODES)
    assert refused.value.status == 401
    async with rest.RestClient(credentials.bearer(kube.url, "t"), clock=clock.SystemClock(), relogin=relogin) as api:
        with pytest.raises(client.KubeError) as refused:
            await api.list(resources.NODES)
    assert refused.value.status == 401
    assert logins == ["again"]  # one login per refusal, not a loop
