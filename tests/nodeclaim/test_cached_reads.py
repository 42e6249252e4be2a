"""The lifecycle reads its NodeClaim and the claim's Node from the state cache, as upstream's reconciler reads its
informer cache (core: pkg/controllers/nodeclaim/lifecycle/controller.go), and stays correct when that cache lags
its own writes by a watch event: no second instance, a stale finalizer patch refused (409) and reconciled again, and
a status write that leaves alone what another writer set meanwhile."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import labels, parse
from karpy.kube import client, resources
from karpy.nodeclaim import controller
from karpy.state import cluster as state_cluster

NAME = "default-abc12"
NODE = "ip-10-0-0-1"


class _Cache:
    """A real state cache fed by hand: `sync` applies what the API server holds now, as the watch would; between
    syncs it lags the writes the reconciler makes."""

    def __init__(self, env: harness.Env) -> None:
        self.env = env
        self.cluster = state_cluster.Cluster(clock=env.clock)

    def sync(self) -> None:
        for res in (resources.NODECLAIMS, resources.NODES):
            for obj in self.env.kube.all(res):
                self.cluster.apply(res, client.WatchEvent(client.MODIFIED, copy.deepcopy(obj)))

    def controller(self) -> controller.NodeClaimController:
        deps = dataclasses.replace(
            self.env.deps,
            claims=self.cluster.nodeclaim,
            nodes_for_provider_id=self.cluster.nodes_for_provider_id,
        )
        return controller.NodeClaimController(deps)


def _reads(env: harness.Env) -> list[str]:
    """Count the GETs the reconciler sends (the fake answers them from its store)."""
    seen: list[str] = []
    get = env.kube.get

    async def counted(res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        seen.append(f"{res.plural}/{name}")
        return await get(res, name, namespace=namespace)

    env.kube.get = counted  # type: ignore[method-assign]
    return seen


def _answers(env: harness.Env) -> list[tuple[str, str, dict[str, Any]]]:
    """Record what each patch the reconciler sends returns (plural, subresource, the object after the write): what
    the write's watch event delivers to the cache."""
    seen: list[tuple[str, str, dict[str, Any]]] = []
    patch = env.kube.patch

    async def answered(
        res: resources.Resource, name: str, body: Any, *, namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        result = await patch(res, name, body, namespace=namespace, subresource=subresource)
        seen.append((res.plural, subresource, copy.deepcopy(result)))
        return result

    env.kube.patch = answered  # type: ignore[method-assign]
    return seen


def _stored(env: harness.Env) -> Any:
    raw = env.claim_obj(NAME)
    assert raw is not None
    return parse.nodeclaim(raw)


async def _launched(env: harness.Env) -> tuple[_Cache, controller.NodeClaimController]:
    """A claim stored, read by a synced cache and reconciled once (launched); the cache has not seen that yet."""
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    cache = _Cache(env)
    ctl = cache.controller()
    cache.sync()
    await ctl.reconcile(NAME)
    return cache, ctl


async def test_a_claim_launches_registers_and_initializes_without_reading_the_api_server() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    cache = _Cache(env)
    reads = _reads(env)
    ctl = cache.controller()
    cache.sync()
    await ctl.reconcile(NAME)
    cache.sync()
    provider_id = _stored(env).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(NODE, provider_id=provider_id))
    cache.sync()
    await ctl.reconcile(NAME)
    cache.sync()
    await ctl.reconcile(NAME)
    assert _stored(env).is_true("Initialized")
    assert reads == []
    # Initialized and unchanged: a reconcile (each Node heartbeat routes one) sends nothing at all.
    cache.sync()
    writes = len(env.kube.writes)
    assert await ctl.reconcile(NAME) is None
    assert len(env.kube.writes) == writes
    assert reads == []


async def test_a_cache_lagging_the_launch_waits_for_it_and_writes_nothing() -> None:
    env = harness.make_env()
    cache, ctl = await _launched(env)
    (launched,) = env.cloud.instances
    # The watch events of that reconcile's writes have not arrived: the cache still holds the claim it read.
    stale = cache.cluster.nodeclaim(NAME)
    assert stale is not None
    assert stale.status.provider_id == ""
    assert labels.FINALIZER_TERMINATION not in stale.metadata.finalizers
    stored = copy.deepcopy(env.claim_obj(NAME))
    writes = len(env.kube.writes)
    # Older than our last write: nothing is sent, not even a finalizer patch bound to be refused; the awaited write's
    # watch event queues the claim again.
    assert await ctl.reconcile(NAME) is None
    assert env.kube.writes[writes:] == []
    assert env.claim_obj(NAME) == stored
    assert list(env.cloud.instances) == [launched]
    assert len(env.cloud.create_calls) == 1
    cache.sync()
    await ctl.reconcile(NAME)
    assert list(env.cloud.instances) == [launched]
    assert _stored(env).status.provider_id == launched


async def test_a_reconcile_queued_by_its_own_first_write_writes_nothing_again() -> None:
    """The watch event of a pass's first write (the finalizer) queues the claim while the cache holds that write but
    not the later ones (initial conditions, launch, labels): acting on it would write those again."""
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    cache = _Cache(env)
    ctl = cache.controller()
    cache.sync()
    answered = _answers(env)
    await ctl.reconcile(NAME)
    kinds = [(plural, subresource) for plural, subresource, _ in answered]
    assert kinds[0] == ("nodeclaims", "")  # the finalizer, before anything else
    assert kinds.count(("nodeclaims", "status")) >= 2  # initial conditions, then the launch
    stored = copy.deepcopy(env.claim_obj(NAME))
    # The watch event of the first write arrives: the cache holds the claim as the finalizer patch left it.
    cache.cluster.apply(resources.NODECLAIMS, client.WatchEvent(client.MODIFIED, answered[0][2]))
    cached = cache.cluster.nodeclaim(NAME)
    assert cached is not None
    assert labels.FINALIZER_TERMINATION in cached.metadata.finalizers
    assert not cached.status.provider_id
    writes = len(env.kube.writes)
    assert await ctl.reconcile(NAME) is None
    assert env.kube.writes[writes:] == []
    assert env.claim_obj(NAME) == stored
    # Caught up: everything that pass wrote is there, nothing to write again (registration waits for a Node).
    cache.sync()
    assert await ctl.reconcile(NAME) == controller.POLL
    assert env.kube.writes[writes:] == []
    assert _stored(env).is_true("Launched")


async def test_a_status_write_from_a_lagging_cache_keeps_what_another_writer_set() -> None:
    env = harness.make_env()
    cache, ctl = await _launched(env)
    cache.sync()
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(NODE, provider_id=_stored(env).status.provider_id))
    # Another controller (the pod events' lastPodEventTime) writes the status twice; the cache saw the first only.
    for seconds in (10, 30):
        event_time = nodeclaim_builders.ts(nodeclaim_builders.T0 + seconds)
        await env.kube.patch(
            resources.NODECLAIMS, NAME, {"status": {"lastPodEventTime": event_time}}, subresource="status"
        )
        if seconds == 10:
            cache.sync()
    await ctl.reconcile(NAME)
    stored = env.claim_obj(NAME)
    assert stored is not None
    assert stored["status"]["lastPodEventTime"] == event_time
    assert _stored(env).is_true("Registered")
    status_writes = [w.body for w in env.kube.writes if w.subresource == "status"]
    assert "lastPodEventTime" not in status_writes[-1]["status"]  # only what the lifecycle changed


async def test_a_claim_gone_from_the_cache_is_left_alone() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    cache = _Cache(env)  # never synced: its DELETED event came, or its ADDED has not
    reads = _reads(env)
    assert await cache.controller().reconcile(NAME) is None
    assert env.kube.writes == []
    assert env.cloud.create_calls == []
    assert reads == []


async def test_a_pass_writes_the_status_once_after_the_launch() -> None:
    """Upstream's lifecycle patches the status once after its sub-reconcilers (lifecycle/controller.go); here the
    initial conditions and the launch are written first, each at once (the launch's providerID before the labels),
    and everything else of the pass goes in one write at its end."""
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    cache = _Cache(env)
    ctl = cache.controller()

    async def status_writes_of_a_pass() -> list[dict[str, Any]]:
        cache.sync()
        before = len(env.kube.writes)
        await ctl.reconcile(NAME)
        return [w.body["status"] for w in env.kube.writes[before:] if w.subresource == "status"]

    initial, launch, no_node = await status_writes_of_a_pass()
    assert {c["type"] for c in initial["conditions"]} >= {"Launched", "Registered", "Initialized", "Ready"}
    assert launch["providerID"]
    assert {c["type"]: c.get("reason") for c in no_node["conditions"]}["Registered"] == "NodeNotFound"
    assert await status_writes_of_a_pass() == []
    node = nodeclaim_builders.node_dict(NODE, provider_id=_stored(env).status.provider_id)
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    env.kube.put(resources.NODES, node)
    (registered,) = await status_writes_of_a_pass()  # registered and not yet initialized: one write for both
    assert registered["nodeName"] == NODE
    found = {c["type"]: c["status"] for c in registered["conditions"]}
    assert (found["Registered"], found["Initialized"]) == ("True", "False")
