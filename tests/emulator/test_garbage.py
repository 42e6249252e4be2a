"""The garbage-collector stand-in against the emulated API server: background and foreground propagation of a
NodePool's deletion to the NodeClaims it owns, and the API server's part (the `foregroundDeletion` finalizer)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from tests import builders

from karpy import clock
from karpy.kube import credentials, resources, rest
from karpy_emulator import garbage, reads
from karpy_emulator.apiserver import audit, runner


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.bearer(kube.url, "tester"), clock=clock.SystemClock()) as client:
        yield client


async def owned_claim(api: rest.RestClient, name: str, pool: dict[str, Any], *, finalizer: bool) -> None:
    claim = builders.nodeclaim(name, finalizers=["karpenter.sh/termination"] if finalizer else None)
    claim["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": pool["metadata"]["name"],
            "uid": pool["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]
    await api.create(resources.NODECLAIMS, claim)


async def names(api: rest.RestClient, res: resources.Resource) -> list[str]:
    items, _ = await api.list(res)
    return sorted(i["metadata"]["name"] for i in items)


async def test_background_deletion_deletes_the_orphans(
    api: rest.RestClient, stand_in_reader: reads.Reader | None
) -> None:
    pool = await api.create(resources.NODEPOOLS, builders.nodepool("a"))
    other = await api.create(resources.NODEPOOLS, builders.nodepool("b"))
    await owned_claim(api, "a-1", pool, finalizer=False)
    await owned_claim(api, "b-1", other, finalizer=False)
    await api.create(resources.NODECLAIMS, builders.nodeclaim("standalone"))
    collector = garbage.GarbageCollector(api, clock=clock.SystemClock(), reader=stand_in_reader)
    assert await collector.sync() == []
    await api.delete(resources.NODEPOOLS, "a")
    assert await collector.sync() == ["NodeClaim/a-1"]
    assert await names(api, resources.NODECLAIMS) == ["b-1", "standalone"]


async def test_foreground_deletion_holds_the_owner_until_its_claims_are_gone(
    api: rest.RestClient, kube: runner.KubeAPIRunner, stand_in_reader: reads.Reader | None
) -> None:
    pool = await api.create(resources.NODEPOOLS, builders.nodepool("a"))
    await owned_claim(api, "a-1", pool, finalizer=True)
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
    async with (
        aiohttp.ClientSession() as session,
        session.delete(f"{kube.url}{resources.NODEPOOLS.path('a')}", json=body) as r,
    ):
        assert r.status == 200
    held = await api.get(resources.NODEPOOLS, "a")
    assert held is not None
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert held["metadata"]["deletionTimestamp"]
    collector = garbage.GarbageCollector(api, clock=clock.SystemClock(), reader=stand_in_reader)
    assert await collector.sync() == ["NodeClaim/a-1"]
    # the claim is deleting but its finalizer holds it (the controller is terminating its node): the pool waits
    assert await collector.sync() == []
    assert await names(api, resources.NODEPOOLS) == ["a"]
    await api.patch(resources.NODECLAIMS, "a-1", {"metadata": {"finalizers": None}})
    assert await names(api, resources.NODECLAIMS) == []
    assert await collector.sync() == ["NodePool/a"]
    assert await names(api, resources.NODEPOOLS) == []


async def test_the_server_records_each_access_under_its_bearer_token(
    api: rest.RestClient, kube: runner.KubeAPIRunner
) -> None:
    await api.create(resources.NODEPOOLS, builders.nodepool("a"))
    await api.get(resources.NODEPOOLS, "a")
    await api.list(resources.PODS, namespace="kube-system")
    await api.patch(resources.NODEPOOLS, "a", {"metadata": {"labels": {"x": "y"}}})
    await api.evict("default", "missing")
    await api.delete(resources.NODEPOOLS, "a")
    seen = {(a.user, a.verb, a.group, a.resource, a.namespace, a.name) for a in kube.api.accesses.snapshot()}
    assert seen == {
        ("tester", "create", "karpenter.sh", "nodepools", "", ""),
        ("tester", "get", "karpenter.sh", "nodepools", "", "a"),
        ("tester", "list", "", "pods", "kube-system", ""),
        ("tester", "patch", "karpenter.sh", "nodepools", "", "a"),
        ("tester", "create", "", "pods/eviction", "default", "missing"),
        ("tester", "delete", "karpenter.sh", "nodepools", "", "a"),
    }
    assert audit.user({}) == audit.ANONYMOUS
    assert audit.verb("GET", named=False, watch=True) == "watch"
    assert audit.verb("DELETE", named=False, watch=False) == "deletecollection"
    assert audit.verb("PUT", named=True, watch=False) == "update"
