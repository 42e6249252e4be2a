"""End to end on the kmock-based API emulator through the real RestClient: a NodeClaim launches and registers,
then its Node is deleted while a PodDisruptionBudget (minAvailable 2) protects its two pods. Evictions are refused
(HTTP 429) until replacements are Ready elsewhere, one at a time; the budget is never broken, nothing is deleted
around it, and both finalizers are released with no instance left."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from tests import polling, tasks
from tests.nodeclaim import builders as nodeclaim_builders

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import credentials, resources, rest
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclaim import lifecycle_observer, written
from karpy.nodeclaim import registration as nodeclaim_registration
from karpy.state import cluster as state_cluster
from karpy.state import informer
from karpy.termination import controller
from karpy.termination import observer as termination_observer
from karpy_emulator.apiserver import runner, server

CLAIM = "default-e2e01"
NODE = "ip-10-0-0-9"


@pytest.fixture
def clock() -> karpy_clock.ManualClock:
    return karpy_clock.ManualClock(nodeclaim_builders.T0)


@pytest.fixture
def kube(clock: karpy_clock.ManualClock) -> Iterator[runner.KubeAPIRunner]:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=3, clock=clock.now)) as served:
        yield served


@pytest.fixture
async def api(kube: runner.KubeAPIRunner, clock: karpy_clock.ManualClock) -> AsyncIterator[rest.RestClient]:
    # The limiter would sleep on the virtual clock; give it room enough never to wait.
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock, qps=1e6, burst=10**6) as client:
        yield client


async def _ready_pod(api: rest.RestClient, name: str, node: str) -> None:
    body = nodeclaim_builders.pod_dict(name, node=node, labels={"app": "web"}, created=None)  # the server stamps it
    status = body.pop("status")
    await api.create(resources.PODS, body)
    await api.patch(resources.PODS, name, {"status": status}, namespace="default", subresource="status")


async def _claim_cached(state: state_cluster.Cluster, version: str) -> None:
    """Until the informer's cache holds the NodeClaim at `version`: its reconciler reads the claim there."""

    def cached() -> bool:
        claim = state.nodeclaim(CLAIM)
        return claim is not None and claim.metadata.resource_version == version

    await polling.until(cached)


def _cached_versions(state: state_cluster.Cluster) -> list[str]:
    """The resourceVersions of the Nodes the informer's cache holds."""
    return [str(n["metadata"]["resourceVersion"]) for n in state.objects(resources.NODES)]


async def _healthy_web(api: rest.RestClient) -> int:
    pods, _ = await api.list(resources.PODS, namespace="default", label_selector="app=web")
    return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp"))


async def test_drain_respects_a_pdb_end_to_end(
    api: rest.RestClient, kube: runner.KubeAPIRunner, clock: karpy_clock.ManualClock
) -> None:
    cloud = fake_provider.FakeCloudProvider()
    recorder = events.MemoryRecorder()
    observer = lifecycle_observer.Observer(recorder, lifecycle_observer.Metrics())
    state = state_cluster.Cluster(clock=clock)  # the controller's informers feed it, as in `karpy run`
    started = clock.now()
    deps = nodeclaim_controller.Deps(
        client=api,
        cloud=cloud,
        clock=clock,
        observer=observer,
        rejections=rejections.Discard(),
        registration=nodeclaim_registration.RegistrationHealth(),
        nodes_for_provider_id=state.nodes_for_provider_id,  # as karpy.wiring.controllers passes it
        claims=state.nodeclaim,
        own_writes=written.Written(),
        leading_since=lambda: started,  # as `karpy run` without leader election: leading since start-up
    )
    claims = nodeclaim_controller.NodeClaimController(deps)
    terminator = controller.TerminationController(
        controller.Deps(
            client=api,
            cloud=cloud,
            clock=clock,
            observer=termination_observer.Observer(recorder, termination_observer.Metrics()),
            rejections=rejections.Discard(),
        ),
        claims=state,  # the NodeClaim informer feeds it too, as karpy.wiring.controllers passes it
    )

    informed = (resources.NODES, resources.NODECLAIMS)
    async with tasks.running(functools.partial(informer.run_informers, api, state, informed)):
        body = nodeclaim_builders.claim_dict(CLAIM)
        body["metadata"] = {"name": CLAIM, "labels": body["metadata"]["labels"]}
        created = await api.create(resources.NODECLAIMS, body)
        await _claim_cached(state, created["metadata"]["resourceVersion"])
        await claims.reconcile(CLAIM)
        claim = await api.get(resources.NODECLAIMS, CLAIM)
        assert claim is not None
        launched = claim["metadata"]["resourceVersion"]
        node_body: dict[str, Any] = nodeclaim_builders.node_dict(NODE, provider_id=claim["status"]["providerID"])
        node_status = node_body.pop("status")
        node_body["metadata"] = {"name": NODE}
        await api.create(resources.NODES, node_body)
        patched = await api.patch(resources.NODES, NODE, {"status": node_status}, subresource="status")
        await polling.until(lambda: _cached_versions(state) == [patched["metadata"]["resourceVersion"]])
        await _claim_cached(state, launched)
        await claims.reconcile(CLAIM)
        claim = await api.get(resources.NODECLAIMS, CLAIM)
        assert claim is not None
        assert claim["status"]["nodeName"] == NODE
        assert any(c["type"] == "Initialized" and c["status"] == "True" for c in claim["status"]["conditions"])

        await api.create(
            resources.PDBS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        for name in ("web-1", "web-2"):
            await _ready_pod(api, name, NODE)
        assert await api.delete(resources.NODES, NODE)

        async def run(seconds: float) -> None:
            end = clock.now() + seconds
            while clock.now() < end and await api.get(resources.NODES, NODE) is not None:
                result = await terminator.reconcile(NODE)
                assert await _healthy_web(api) >= 2
                clock.advance(result if result is not None else 1.0)

        await run(5)
        refused = [e for e in kube.api.evictions if not e.allowed]
        assert refused
        assert {e.code for e in refused} == {429}
        assert recorder.reasons().count("Evicted") == 0
        node = await api.get(resources.NODES, NODE)
        assert node is not None
        assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in node["spec"]["taints"]

        await _ready_pod(api, "web-3", "other-node")  # a replacement becomes Ready: one eviction fits the budget
        await run(5)
        assert recorder.reasons().count("Evicted") == 1

        await _ready_pod(api, "web-4", "other-node")
        await run(30)
        assert await api.get(resources.NODES, NODE) is None
        assert recorder.reasons().count("Evicted") == 2
        assert recorder.reasons().count("Disrupted") == 0  # no pod deleted instead of evicted
        assert len([e for e in kube.api.evictions if e.allowed]) == 2
        assert cloud.instances == {}

        await polling.until(lambda: _cached_versions(state) == [])  # the informer saw the Node go
        for _ in range(10):  # the NodeClaim finalizer finishes once Node and instance are gone
            current = await api.get(resources.NODECLAIMS, CLAIM)
            if current is None:
                break
            await _claim_cached(state, current["metadata"]["resourceVersion"])
            await claims.reconcile(CLAIM)
        assert await api.get(resources.NODECLAIMS, CLAIM) is None
